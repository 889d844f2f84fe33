//! `flashforward bench vae`: times the Wan VAE decode of `--latents` latent frames
//! `[1, 16, L, H/8, W/8]` to video `[1, 3, 1 + 4(L−1), H, W]` with random weights, the way
//! `generate` decodes a finished clip. Presets: `tiny` (base_dim 8, one residual block per stage,
//! the small world's width; 64×64 px by default), `world` (the shipped small-world codec:
//! `tiny` with a decoder twice as wide, `decoder_base_dim` 16) and `wan2.1` (the released VAE's width,
//! base_dim 96; 480×832 px by default). PyTorch's `AutoencoderKLWan` on the same shapes is
//! `scripts/bench_vae_torch.py`.

use crate::backend::{BackendTask, DeviceSpec, Precision, dispatch};
use burn::tensor::{Distribution, Tensor};
use ff_model::AttentionBackend;
use ff_model::vae::WanVaeConfig;
use std::process::ExitCode;
use std::time::Instant;

#[derive(clap::Args)]
pub struct Args {
    /// VAE presets to time: tiny, world, wan2.1.
    #[arg(long, value_delimiter = ',', default_value = "tiny,wan2.1")]
    configs: Vec<String>,
    /// Latent frames decoded in one call.
    #[arg(long, default_value_t = 21)]
    latents: usize,
    /// Frame height in pixels (default: 64 for tiny, 480 for wan2.1).
    #[arg(long)]
    height: Option<usize>,
    /// Frame width in pixels (default: 64 for tiny, 832 for wan2.1).
    #[arg(long)]
    width: Option<usize>,
    /// Device to run on: cpu, ndarray, cuda:N, wgpu:N.
    #[arg(long, default_value = "cpu")]
    devices: DeviceSpec,
    #[arg(long, value_enum, default_value = "f32")]
    precision: Precision,
    /// Timed repetitions (after one warm-up; 0 times the first call alone).
    #[arg(long, default_value_t = 1)]
    iters: usize,
}

/// The preset's VAE config and default frame size.
fn preset(name: &str) -> anyhow::Result<(WanVaeConfig, [usize; 2])> {
    let wan = WanVaeConfig::wan2_1();
    Ok(match name {
        "tiny" => (WanVaeConfig { base_dim: 8, num_res_blocks: 1, ..wan }, [64, 64]),
        "world" => (WanVaeConfig::tiny_world().with_decoder_base_dim(Some(16)), [64, 64]),
        "wan2.1" => (wan, [480, 832]),
        other => anyhow::bail!("--configs: unknown VAE preset '{other}' (tiny, world, wan2.1)"),
    })
}

struct Bench<'a> {
    config: &'a WanVaeConfig,
    size: [usize; 2],
    args: &'a Args,
}

impl BackendTask for Bench<'_> {
    type Output = f64;
    fn run<B: AttentionBackend>(self, devices: Vec<B::Device>) -> anyhow::Result<f64> {
        let device = &devices[0];
        let vae = self.config.init::<B>(device);
        let f = self.config.spatial_factor();
        let shape = [1, self.config.z_dim, self.args.latents, self.size[0] / f, self.size[1] / f];
        let latents = Tensor::<B, 5>::random(shape, Distribution::Normal(0.0, 1.0), device);
        let decode = || -> anyhow::Result<()> {
            let _ = vae.decode(latents.clone())?.into_data();
            Ok(())
        };
        if self.args.iters == 0 {
            let t = Instant::now();
            decode()?;
            return Ok(t.elapsed().as_secs_f64());
        }
        decode()?;
        let t = Instant::now();
        for _ in 0..self.args.iters {
            decode()?;
        }
        Ok(t.elapsed().as_secs_f64() / self.args.iters as f64)
    }
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    if a.latents == 0 {
        anyhow::bail!("--latents must be at least 1");
    }
    println!("VAE decode of {} latent frames on {} ({:?}), random weights", a.latents, a.devices, a.precision);
    println!("| preset | decoder width | frames | pixels | seconds/decode | seconds/latent | frames/s |");
    println!("| --- | ---: | ---: | --- | ---: | ---: | ---: |");
    for name in &a.configs {
        let (config, default) = preset(name)?;
        let size = [a.height.unwrap_or(default[0]), a.width.unwrap_or(default[1])];
        let f = config.spatial_factor();
        if size.iter().any(|s| *s == 0 || s % f != 0) {
            anyhow::bail!("--height/--width {}×{} must be positive multiples of {f} for {name}", size[0], size[1]);
        }
        let seconds = dispatch(&a.devices, a.precision, Bench { config: &config, size, args: &a })?;
        let frames = 1 + config.temporal_factor() * (a.latents - 1);
        println!(
            "| {name} | {} | {frames} | {}×{} | {seconds:.3} | {:.3} | {:.2} |",
            config.decoder_width(),
            size[0],
            size[1],
            seconds / a.latents as f64,
            frames as f64 / seconds
        );
    }
    Ok(ExitCode::SUCCESS)
}
