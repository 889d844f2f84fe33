//! `generate` on Burn's wgpu backend (what `--devices wgpu:0` runs: Burn's attention op for the
//! chunks' full tables, Burn's fusion for the element-wise ops) against the CPU, five seconds of
//! the default model. CI runs it on Mesa's lavapipe (a Vulkan driver on the CPU):
//! `cargo test -p flashforward --features wgpu --test wgpu`.

#![cfg(feature = "wgpu")]

use burn::backend::Wgpu;
use burn::backend::wgpu::WgpuDevice;
use flashforward::{Cpu, Pipeline, Request};

#[test]
fn five_seconds_on_wgpu_match_the_cpu() {
    // Tolerance: PSNR ≥ 50 dB over every pixel of every frame, no pixel off by more than 8
    // (measured on lavapipe: 93.5 dB, largest difference 1). Both run f32; the GPU sums
    // attention, matmuls and convolutions in other orders than the CPU kernels, and those
    // last-bit differences pass through the denoising stages and the decoder. A wrong key set,
    // mask or fused op changes whole regions (PSNR far below 30 dB).
    let dir = flashforward::default_model_dir().expect("the default model in models/world");
    let request = Request::new("a red circle bounces").seconds(5.0).seed(0);
    let cpu = Pipeline::<Cpu>::load(&dir, &Default::default()).unwrap().generate(&request).unwrap();
    let gpu = Pipeline::<Wgpu>::load(&dir, &WgpuDevice::default()).unwrap().generate(&request).unwrap();
    assert_eq!(cpu.frames().len(), gpu.frames().len());
    let (mut squares, mut count, mut worst) = (0.0f64, 0usize, 0u8);
    for (a, b) in cpu.frames().iter().zip(gpu.frames()) {
        assert_eq!(a.dimensions(), b.dimensions());
        for (x, y) in a.as_raw().iter().zip(b.as_raw()) {
            let d = x.abs_diff(*y);
            squares += f64::from(d).powi(2);
            worst = worst.max(d);
            count += 1;
        }
    }
    let psnr = 10.0 * (255.0f64.powi(2) / (squares / count as f64).max(1e-12)).log10();
    eprintln!("wgpu against the CPU: PSNR {psnr:.1} dB, largest pixel difference {worst}");
    assert!(psnr >= 50.0 && worst <= 8, "PSNR {psnr:.1} dB, largest pixel difference {worst}");
}
