//! `flashforward bench attention`: block-sparse attention paths on one layout as the sequence
//! grows. Paths: `dense` (Burn's stock attention under a dense token mask, built here only),
//! `blockwise` (the portable path, the reference of `max_rel_err`) and `kernel` (the backend's
//! fused kernel: CubeCL on GPU backends, the CPU kernel on NdArray and Flex in f32). Layouts:
//! `packed-sft` (the paper's packed SFT sequence with `--frames` renderer latents; 81 gives its
//! 155 frames) and `chunk` (3 query frames over `--frames` context frames and themselves). Per
//! row: mean seconds per call (forward, or forward + backward with `--backward`), the growth of
//! the process's peak resident memory during the calls (host RAM: NdArray tensors, or lavapipe's
//! device memory; not CUDA device memory), achieved GFLOP/s counting only the allowed blocks,
//! and errors against blockwise.

use crate::backend::{BackendTask, DeviceSpec, Precision, dispatch};
use burn::backend::Autodiff;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::module::attention as burn_attention;
use burn::tensor::{Bool, Distribution, ElementConversion, Tensor, TensorData};
use ff_model::AttentionBackend;
use kernels_cubecl::kernel::layouts::{chunk_table, packed_sft_table};
use kernels_cubecl::{BlockTable, blockwise, kernel_attention};
use serde::Serialize;
use std::process::ExitCode;
use std::time::Instant;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Layout {
    PackedSft,
    Chunk,
}

#[derive(clap::Args)]
pub struct Args {
    /// Device: cpu, wgpu:N, cuda:N.
    #[arg(long, default_value = "cpu")]
    devices: DeviceSpec,
    #[arg(long, value_enum, default_value = "packed-sft")]
    layout: Layout,
    /// Renderer latents (packed-sft) or context frames (chunk); a comma list sweeps.
    #[arg(long, value_delimiter = ',', default_value = "6")]
    frames: Vec<usize>,
    /// Tokens per latent frame; a comma list sweeps.
    #[arg(long, value_delimiter = ',', default_value = "16")]
    tokens_per_frame: Vec<usize>,
    #[arg(long, default_value_t = 2)]
    heads: usize,
    #[arg(long, default_value_t = 64)]
    head_dim: usize,
    /// Time forward + backward (loss `sum(out · w)`) instead of the forward.
    #[arg(long)]
    backward: bool,
    /// One JSON array of rows instead of a table.
    #[arg(long)]
    json: bool,
    /// Timed calls per path (after one warm-up call).
    #[arg(long, default_value_t = 3)]
    iters: usize,
    /// The dense path is skipped when its mask and score matrices would exceed this many bytes.
    #[arg(long, default_value_t = 4_000_000_000)]
    dense_budget_bytes: u64,
    #[arg(long, value_enum, default_value = "f32")]
    precision: Precision,
}

#[derive(Serialize)]
struct Row {
    path: &'static str,
    backend: String,
    layout: String,
    frames: usize,
    tokens_per_frame: usize,
    packed_frames: usize,
    q_tokens: usize,
    k_tokens: usize,
    /// Allowed query × key token pairs (the work of a sparse path).
    allowed_pairs: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    seconds: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    peak_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    gflops: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_rel_err: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    grad_max_rel_err: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    skipped: Option<String>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Path {
    Dense,
    Blockwise,
    Kernel,
}

impl Path {
    fn name(self) -> &'static str {
        match self {
            Path::Dense => "dense",
            Path::Blockwise => "blockwise",
            Path::Kernel => "kernel",
        }
    }
}

/// The dense token mask `[q_tokens, k_tokens]` (true = masked out). The benchmark's dense
/// baseline is the one place in the code that builds a token-level mask, on purpose: it measures
/// what the block table saves.
fn dense_mask<B: AttentionBackend>(table: &BlockTable, device: &B::Device) -> Tensor<B, 2, Bool> {
    let (nq, nk) = table.tokens();
    let (qf, kf) = table.frames();
    let frame_of = |n: usize, frames: usize, side: fn(&BlockTable, &std::ops::Range<usize>) -> std::ops::Range<usize>| {
        let mut of = vec![0; n];
        for f in 0..frames {
            for t in side(table, &(f..f + 1)) {
                of[t] = f;
            }
        }
        of
    };
    let (q_of, k_of) = (frame_of(nq, qf, BlockTable::query_tokens), frame_of(nk, kf, BlockTable::key_tokens));
    let mut m = Vec::with_capacity(nq * nk);
    for &q in &q_of {
        m.extend(k_of.iter().map(|&k| !table.is_allowed(q, k)));
    }
    Tensor::from_data(TensorData::new(m, [nq, nk]), device)
}

/// One path's output; `None` where the backend has no kernel.
fn attend<B: AttentionBackend>(
    path: Path,
    qkv: [Tensor<B, 4>; 3],
    table: &BlockTable,
    mask: Option<&Tensor<B, 2, Bool>>,
) -> Option<Tensor<B, 4>> {
    let [q, k, v] = qkv;
    match path {
        Path::Dense => {
            let [b, h, nq, _] = q.dims();
            let mask = mask.expect("dense path has its mask").clone().unsqueeze::<4>().expand([b, h, nq, k.dims()[2]]);
            Some(burn_attention(q, k, v, Some(mask), None, Default::default()))
        }
        Path::Blockwise => Some(blockwise::attention(q, k, v, table)),
        Path::Kernel => kernel_attention(q, k, v, table),
    }
}

/// Forward + backward of `sum(out · w)`: the output and the gradients of q, k, v.
fn grads<A: AutodiffBackend + AttentionBackend>(
    path: Path,
    qkv: &[Tensor<A::InnerBackend, 4>; 3],
    w: &Tensor<A::InnerBackend, 4>,
    table: &BlockTable,
    mask: Option<&Tensor<A, 2, Bool>>,
) -> Option<Vec<Tensor<A::InnerBackend, 4>>> {
    let leaves = qkv.clone().map(|t| Tensor::<A, 4>::from_inner(t).require_grad());
    let out = attend(path, leaves.clone(), table, mask)?;
    let g = (out.clone() * Tensor::from_inner(w.clone())).sum().backward();
    let mut outs = vec![out.inner()];
    outs.extend(leaves.iter().map(|t| t.grad(&g).expect("input is in the loss")));
    Some(outs)
}

/// Peak resident memory (kB → bytes) from /proc, after resetting it to the current resident size.
mod rss {
    fn field(name: &str) -> Option<u64> {
        let status = std::fs::read_to_string("/proc/self/status").ok()?;
        let line = status.lines().find(|l| l.starts_with(name))?;
        line.split_whitespace().nth(1)?.parse::<u64>().ok().map(|kb| kb * 1024)
    }

    /// Resets the high-water mark and returns the resident bytes now.
    pub fn reset() -> Option<u64> {
        std::fs::write("/proc/self/clear_refs", "5").ok()?;
        field("VmRSS:")
    }

    pub fn peak() -> Option<u64> {
        field("VmHWM:")
    }
}

fn max_rel_err<B: AttentionBackend>(a: &Tensor<B, 4>, b: &Tensor<B, 4>) -> f64 {
    let diff: f32 = (a.clone() - b.clone()).abs().max().into_scalar().elem();
    let scale: f32 = b.clone().abs().max().into_scalar().elem();
    (diff / scale.max(f32::MIN_POSITIVE)) as f64
}

struct Bench<'a> {
    args: &'a Args,
}

impl BackendTask for Bench<'_> {
    type Output = Vec<Row>;
    fn run<B: AttentionBackend>(self, devices: Vec<B::Device>) -> anyhow::Result<Vec<Row>> {
        let mut rows = Vec::new();
        for &frames in &self.args.frames {
            for &tpf in &self.args.tokens_per_frame {
                rows.extend(bench::<B>(self.args, frames, tpf, &devices[0]));
            }
        }
        Ok(rows)
    }
}

/// `f()`, or the first line of its panic message (at most 300 characters) with the panic hook
/// silenced meanwhile.
fn quiet_catch<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    std::panic::set_hook(hook);
    out.map_err(|e| {
        let msg = e.downcast_ref::<String>().cloned().or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()));
        let msg = msg.unwrap_or_else(|| "panic without a message".into());
        msg.lines().find(|l| !l.trim().is_empty()).unwrap_or("").chars().take(300).collect()
    })
}

fn bench<B: AttentionBackend>(a: &Args, frames: usize, tpf: usize, device: &B::Device) -> Vec<Row> {
    let table = match a.layout {
        Layout::PackedSft => packed_sft_table(frames, tpf),
        Layout::Chunk => chunk_table(frames, tpf),
    };
    let (nq, nk) = table.tokens();
    let (b, h, d) = (1, a.heads, a.head_dim);
    let random = |n: usize| Tensor::<B, 4>::random([b, h, n, d], Distribution::Normal(0.0, 1.0), device);
    let qkv = [random(nq), random(nk), random(nk)];
    let w = random(nq);
    // Forward 4·d flops per allowed pair; FlashAttention-2's backward adds 10·d.
    let flops = table.allowed_pairs() as f64 * (b * h * d) as f64 * if a.backward { 14.0 } else { 4.0 };
    // Dense: bool mask plus f32 scores, softmax and (backward) their gradients per head.
    let dense_bytes = (nq * nk) as u64 * (1 + 4 * (b * h) as u64 * if a.backward { 6 } else { 3 });
    let row = |path: Path| Row {
        path: path.name(),
        backend: a.devices.to_string(),
        layout: format!("{:?}", a.layout),
        frames,
        tokens_per_frame: tpf,
        packed_frames: table.frames().0,
        q_tokens: nq,
        k_tokens: nk,
        allowed_pairs: table.allowed_pairs(),
        seconds: None,
        peak_bytes: None,
        gflops: None,
        max_rel_err: None,
        grad_max_rel_err: None,
        skipped: None,
    };
    let mut reference: Option<Vec<Tensor<B, 4>>> = None;
    let mut rows = Vec::new();
    for path in [Path::Blockwise, Path::Kernel, Path::Dense] {
        let mut r = row(path);
        if path == Path::Dense && dense_bytes > a.dense_budget_bytes {
            r.skipped = Some(format!("dense mask + scores need about {dense_bytes} bytes > --dense-budget-bytes {}", a.dense_budget_bytes));
            rows.push(r);
            continue;
        }
        let before = rss::reset();
        let fwd_mask = (path == Path::Dense && !a.backward).then(|| dense_mask::<B>(&table, device));
        let bwd_mask = (path == Path::Dense && a.backward).then(|| dense_mask::<Autodiff<B>>(&table, device));
        let call = || -> Option<Vec<Tensor<B, 4>>> {
            let outs = match a.backward {
                true => grads::<Autodiff<B>>(path, &qkv, &w, &table, bwd_mask.as_ref())?,
                false => vec![attend(path, qkv.clone(), &table, fwd_mask.as_ref())?],
            };
            // Synchronise: read one scalar per result.
            for x in &outs {
                let _: f32 = x.clone().sum().into_scalar().elem();
            }
            Some(outs)
        };
        let first = match path {
            // The dense path allocates `[batch, heads, q, k]` score buffers that a device may not
            // have room for (lavapipe: a 242 MB buffer at 42 packed frames), and CubeCL panics
            // then: that path is reported as skipped with the device's reason, the others timed.
            Path::Dense => match quiet_catch(call) {
                Ok(outs) => outs,
                Err(why) => {
                    r.skipped = Some(format!("the dense path failed on this device: {why}"));
                    rows.push(r);
                    continue;
                }
            },
            _ => call(),
        };
        let Some(outs) = first else {
            r.skipped = Some("no fused kernel on this backend".into());
            rows.push(r);
            continue;
        };
        let t = Instant::now();
        for _ in 0..a.iters {
            call();
        }
        let seconds = t.elapsed().as_secs_f64() / a.iters.max(1) as f64;
        r.seconds = Some(seconds);
        r.gflops = Some(flops / seconds / 1e9);
        r.peak_bytes = before.zip(rss::peak()).map(|(b, p)| p.saturating_sub(b));
        let want = reference.get_or_insert_with(|| outs.clone());
        r.max_rel_err = Some(max_rel_err(&outs[0], &want[0]));
        if a.backward {
            r.grad_max_rel_err = Some(outs[1..].iter().zip(&want[1..]).map(|(x, y)| max_rel_err(x, y)).fold(0.0, f64::max));
        }
        rows.push(r);
    }
    rows
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let rows = dispatch(&a.devices, a.precision, Bench { args: &a })?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(ExitCode::SUCCESS);
    }
    let mode = if a.backward { "forward + backward" } else { "forward" };
    println!("{:?} layout on {}, {} heads × {}, {mode}, mean of {} calls", a.layout, a.devices, a.heads, a.head_dim, a.iters);
    println!(
        "| path | frames | tokens/frame | packed frames | q tokens | k tokens | allowed pairs | seconds | peak bytes | GFLOP/s | max rel err | grad max rel err |"
    );
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    let opt = |x: Option<f64>, f: fn(f64) -> String| x.map(f).unwrap_or_else(|| "-".into());
    for r in &rows {
        let tail = match &r.skipped {
            Some(why) => format!("skipped: {why} | | | | |"),
            None => format!(
                "{} | {} | {} | {} | {}",
                opt(r.seconds, |s| format!("{s:.4}")),
                r.peak_bytes.map(|b| b.to_string()).unwrap_or_else(|| "-".into()),
                opt(r.gflops, |g| format!("{g:.2}")),
                opt(r.max_rel_err, |e| format!("{e:.1e}")),
                opt(r.grad_max_rel_err, |e| format!("{e:.1e}")),
            ),
        };
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {tail} |",
            r.path, r.frames, r.tokens_per_frame, r.packed_frames, r.q_tokens, r.k_tokens, r.allowed_pairs
        );
    }
    Ok(ExitCode::SUCCESS)
}
