//! `flashforward bench dit`: times the DiT chunk forward (CPU NdArray, or CUDA/wgpu when built
//! with those features) for a preset with
//! random weights: one chunk of latents over published K/V (anchor window + history), the way
//! a renderer forward runs. Reports tokens/s and the share of time spent outside matmul and
//! attention, measured by replaying the forward's matmuls and attentions alone with the same
//! shapes.

use crate::backend::{BackendTask, DeviceSpec, Precision, dispatch};
use burn::tensor::{Distribution, Tensor};
use ff_model::AttentionBackend;
use ff_model::dit::{ChunkKv, DitConfig, FrameLayout, KvContext, KvWindow, LayerKv, Role, SegmentContext, WanDit};
use kernels_cubecl::{BlockTable, attention};
use std::process::ExitCode;
use std::time::Instant;

#[derive(clap::Args)]
pub struct Args {
    /// Presets to time: tiny, small (mid-size), 1.3b, 14b.
    #[arg(long, value_delimiter = ',', default_value = "tiny,small")]
    configs: Vec<String>,
    /// Latent frames per chunk.
    #[arg(long, default_value_t = 3)]
    chunk: usize,
    /// Published context entries of one chunk each (anchor window + 5 history chunks).
    #[arg(long, default_value_t = 6)]
    context: usize,
    /// Latent height and width (480p is 60×104).
    #[arg(long, default_value_t = 30)]
    height: usize,
    #[arg(long, default_value_t = 52)]
    width: usize,
    /// Prompt tokens.
    #[arg(long, default_value_t = 512)]
    text_tokens: usize,
    /// Device to run on: cpu, cuda:N, wgpu:N.
    #[arg(long, default_value = "cpu")]
    devices: DeviceSpec,
    #[arg(long, value_enum, default_value = "f32")]
    precision: Precision,
    /// Timed repetitions (after one warm-up).
    #[arg(long, default_value_t = 3)]
    iters: usize,
}

fn mean_seconds(iters: usize, mut f: impl FnMut()) -> f64 {
    f();
    let t = Instant::now();
    for _ in 0..iters {
        f();
    }
    t.elapsed().as_secs_f64() / iters as f64
}

fn random<B: AttentionBackend, const D: usize>(shape: [usize; D], device: &B::Device) -> Tensor<B, D> {
    Tensor::random(shape, Distribution::Normal(0.0, 1.0), device)
}

/// Seconds of the chunk forward's matmuls and attentions alone, same shapes.
fn replay<B: AttentionBackend>(c: &DitConfig, n: usize, keys: usize, text: usize, iters: usize, device: &B::Device) -> f64 {
    let (d, h, hd) = (c.dim, c.num_heads, c.head_dim());
    let x = random::<B, 3>([1, n, d], device);
    let w = random::<B, 3>([1, d, d], device);
    let up = random::<B, 3>([1, d, c.ffn_dim], device);
    let down = random::<B, 3>([1, c.ffn_dim, d], device);
    let hidden = random::<B, 3>([1, n, c.ffn_dim], device);
    let q = random::<B, 4>([1, h, n, hd], device);
    let (k, v) = (random::<B, 4>([1, h, keys, hd], device), random::<B, 4>([1, h, keys, hd], device));
    let (tk, tv) = (random::<B, 4>([1, h, text, hd], device), random::<B, 4>([1, h, text, hd], device));
    let layer = mean_seconds(iters, || {
        for _ in 0..6 {
            let _ = x.clone().matmul(w.clone()).into_data();
        }
        let _ = x.clone().matmul(up.clone()).into_data();
        let _ = hidden.clone().matmul(down.clone()).into_data();
        let _ = attention(q.clone(), k.clone(), v.clone(), &BlockTable::full(&[n], &[keys])).into_data();
        let _ = attention(q.clone(), tk.clone(), tv.clone(), &BlockTable::full(&[n], &[text])).into_data();
    });
    layer * c.num_layers as f64
}

struct Row {
    name: String,
    mode: &'static str,
    tokens: usize,
    keys: usize,
    seconds: f64,
    outside: f64,
}

struct Bench<'a> {
    name: &'a str,
    args: &'a Args,
}

impl BackendTask for Bench<'_> {
    type Output = Vec<Row>;
    fn run<B: AttentionBackend>(self, devices: Vec<B::Device>) -> anyhow::Result<Vec<Row>> {
        bench::<B>(self.name, self.args, &devices[0])
    }
}

fn bench<B: AttentionBackend>(name: &str, a: &Args, device: &B::Device) -> anyhow::Result<Vec<Row>> {
    let device = device.clone();
    let c = crate::schedule::preset(name)?;
    let model: WanDit<B> = c.init(&device);
    let per_frame = (a.height / c.patch_size[1]) * (a.width / c.patch_size[2]);
    let n = a.chunk * per_frame;
    let ctx_tokens = a.context * n;
    let (h, hd) = (c.num_heads, c.head_dim());
    let entry = || ChunkKv::<B> {
        layers: (0..c.num_layers)
            .map(|_| LayerKv { k: random::<B, 4>([1, h, n, hd], &device), v: random::<B, 4>([1, h, n, hd], &device) })
            .collect(),
    };
    let published: Vec<ChunkKv<B>> = (0..a.context).map(|_| entry()).collect();
    let text = model.text_context(random::<B, 3>([1, a.text_tokens, c.text_dim], &device));
    let latents = random::<B, 5>([1, c.in_channels, a.chunk, a.height, a.width], &device);
    let layout = FrameLayout::chunk(a.context * a.chunk, a.chunk, Role::Base);
    let timesteps = vec![vec![937.0; a.chunk]];
    let segments = SegmentContext::new(published.iter().collect());
    let mut window = KvWindow::<B>::new(c.num_layers, h, hd, per_frame, (a.context + 1) * a.chunk, &device);
    for (i, e) in published.iter().enumerate() {
        window.write(i * a.chunk, e)?;
    }
    window.attend(std::iter::once(0..a.context * a.chunk), a.context * a.chunk, a.chunk)?;
    let core = replay::<B>(&c, n, ctx_tokens + n, a.text_tokens, a.iters, &device);
    let mut rows = Vec::new();
    for (mode, ctx) in [("segments", &segments as &dyn KvContext<B>), ("window", &window as &dyn KvContext<B>)] {
        let mut failure = None;
        let seconds = mean_seconds(a.iters, || match model.forward_chunk(latents.clone(), &timesteps, &layout, &text, ctx) {
            Ok(out) => {
                let _ = out.prediction.into_data();
            }
            Err(e) => failure = Some(e),
        });
        if let Some(e) = failure {
            return Err(e.into());
        }
        rows.push(Row { name: name.to_string(), mode, tokens: n, keys: ctx_tokens + n, seconds, outside: (1.0 - core / seconds).max(0.0) });
    }
    Ok(rows)
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    println!(
        "chunk forward on {} ({:?}), {}×{} latents, chunk of {} frames over {} published chunks, {} text tokens",
        a.devices, a.precision, a.height, a.width, a.chunk, a.context, a.text_tokens
    );
    println!("| preset | context | query tokens | key tokens | seconds/forward | tokens/s | share outside matmul+attention |");
    println!("| --- | --- | ---: | ---: | ---: | ---: | ---: |");
    for name in &a.configs {
        for r in dispatch(&a.devices, a.precision, Bench { name, args: &a })? {
            let tps = r.tokens as f64 / r.seconds;
            println!("| {} | {} | {} | {} | {:.4} | {:.0} | {:.1}% |", r.name, r.mode, r.tokens, r.keys, r.seconds, tps, 100.0 * r.outside);
        }
    }
    Ok(ExitCode::SUCCESS)
}
