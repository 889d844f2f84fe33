//! The whole tiny DiT's packed forward and its gradients on wgpu (the fused kernel under
//! `Autodiff<Wgpu>`, Burn's fusion on) equal NdArray's (the blockwise path under
//! `Autodiff<NdArray>`) and those without fusion, on the
//! fixture model `wan_dit_tiny` (`ff_model::fixture::dir`: `$FF_FIXTURES`, default the
//! repository's `tests/fixtures`).
//! Run: `cargo test -p kernels-cubecl --features wgpu --test dit_wgpu`.

#![cfg(feature = "wgpu")]

mod common;

use burn::backend::wgpu::WgpuDevice;
use burn::backend::{Autodiff, NdArray, Wgpu};
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{Tensor, TensorData};
use common::{Lcg, rel_err};
use ff_model::dit::{DitConfig, FrameLayout, SegmentMask, WanDit};
use ff_model::{AttentionBackend, Role};
use std::path::PathBuf;

fn fixture() -> PathBuf {
    ff_model::fixture::dir().join("wan_dit_tiny")
}

/// Output, gradient of the latents and of the first block's self-attention q weight, for the
/// loss `sum(out · w)` of a packed forward: 2 anchor frames that see each other, then 4 frames
/// in block-causal pairs that also see the anchors.
fn packed<B: AutodiffBackend + AttentionBackend>(device: &B::Device) -> [TensorData; 3] {
    let dir = fixture();
    let config = DitConfig::from_json(dir.join("meta.json")).expect("fixture config");
    let model = WanDit::<B>::load(&config, dir.join("weights_wan.safetensors"), device).expect("fixture weights");
    let mut rng = Lcg(5);
    let shape = [1, 16, 6, 8, 12];
    let data = |rng: &mut Lcg, shape: Vec<usize>| {
        let n = shape.iter().product();
        TensorData::new((0..n).map(|_| rng.unit()).collect::<Vec<f32>>(), shape)
    };
    let latents = Tensor::<B, 5>::from_data(data(&mut rng, shape.to_vec()), device).require_grad();
    let text = model.text_context(Tensor::from_data(data(&mut rng, vec![1, 10, config.text_dim]), device));
    let w = Tensor::<B, 5>::from_data(data(&mut rng, shape.to_vec()), device);
    let layout = FrameLayout::frames(vec![0, 10, 0, 1, 2, 3], Role::Base);
    let mask = SegmentMask::new(6).allow(0..2, 0..2).allow(2..4, 0..4).allow(4..6, 0..6);
    let timesteps = vec![vec![0.0, 0.0, 937.0, 937.0, 833.0, 833.0]];
    let out = model.forward_packed(latents.clone(), &timesteps, &layout, &text, &mask).expect("packed forward");
    let grads = (out.clone() * w).sum().backward();
    let q_weight = model.blocks[0].self_attn.q.base.weight.val();
    [
        out.into_data(),
        latents.grad(&grads).expect("latents in the loss").into_data(),
        q_weight.grad(&grads).expect("q weight in the loss").into_data(),
    ]
}

#[test]
fn fusion_changes_no_output_or_gradient_of_the_dit() {
    // Burn's `Wgpu` is `Fusion<CubeBackend<..>>` (the `fusion` feature, on with `wgpu`): runs of
    // element-wise ops become one generated kernel. Tolerance 1e-5 relative: a fused kernel may
    // contract a multiply and an add into one rounding where the unfused ops round twice.
    type Plain = burn::backend::wgpu::CubeBackend<burn::backend::wgpu::WgpuRuntime, f32, i32, u32>;
    let fused = packed::<Autodiff<Wgpu>>(&WgpuDevice::default());
    let plain = packed::<Autodiff<Plain>>(&WgpuDevice::default());
    for (name, (f, p)) in ["output", "latent grad", "q weight grad"].iter().zip(fused.iter().zip(&plain)) {
        let err = rel_err(f, p);
        assert!(err <= 1e-5, "{name}: fused against unfused, rel err {err}");
    }
}

#[test]
fn packed_forward_and_gradients_on_wgpu_equal_ndarray() {
    let got = packed::<Autodiff<Wgpu>>(&WgpuDevice::default());
    let want = packed::<Autodiff<NdArray>>(&Default::default());
    for (name, (g, w)) in ["output", "latent grad", "q weight grad"].iter().zip(got.iter().zip(&want)) {
        let err = rel_err(g, w);
        assert!(err <= 1e-4, "{name}: rel err {err}");
    }
}
