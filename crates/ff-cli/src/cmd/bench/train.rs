//! `flashforward bench train`: one Phase 1 step (packed forward + backward + Burn AdamW step with
//! the paper's values) of random-weight presets on random latents, in f32 or in bf16 over f32
//! master weights, with or without per-block checkpointing (the trainer's step forms,
//! `ff_train::engine::StepModule`), whole or as one device's part of a context-parallel step
//! (`--context-parallel D`: shard 0 with the others' K/V as constants, since the CPU "devices"
//! share one process's memory): steps/s and, on the CPU, the
//! process's peak resident memory during the step (`VmHWM` after resetting it through
//! `/proc/self/clear_refs`: it includes the weights and optimizer state already held). Then the
//! memory plan of the paper's layout at the 1.3B shape, by arithmetic (composition below), and
//! the per-device plan of Phase 1 by precision, checkpointing and device count ([`super::scale`]).
//!
//! Memory plan, per device, no sharding: weights in the training dtype; trainable parameters
//! (LoRA + role vectors, or everything) also as f32 gradient, two f32 AdamW moments (Burn keeps
//! the first moment even at β₁ = 0) and an f32 EMA copy. Activations saved for backward, per
//! layer with `N` packed tokens: ≈ 33 `[N, dim]` (13 in self-attention: norm, modulation, q/k/v,
//! q/k norms and RoPE, attention output, projection, residual; 12 for the role-masked LoRA deltas
//! of two roles on 6 projections; 5 in cross-attention; 3 around the FFN) + 2 `[N, ffn]` (FFN
//! hidden before and after GELU); with per-layer checkpointing only the layer inputs stay and one
//! layer is recomputed. Attention: the dense token mask and dense f32 scores a token-level
//! implementation would build, against the scores of the allowed frame pairs only.

use super::{StepShape, gib, param_counts, proc_status};
use crate::backend::{BackendTask, DeviceSpec, Precision, dispatch};
use burn::backend::Autodiff;
use burn::module::Module;
use burn::optim::{AdamWConfig, GradientsParams, Optimizer};
use burn::tensor::Tensor;
use ff_model::AttentionBackend;
use ff_model::dit::{DitConfig, KvExchange, LayerKv, Shard, ShardReads, WanDit, shard_frames};
use ff_model::lora::LoraConfig;
use ff_train::data::LatentClip;
use ff_train::engine::{Checkpointing, Precision as TrainPrecision, StepModule, TrainConfig};
use ff_train::sft::{Packed, SftConfig, SftObjective, pack};
use ff_train::{Objective, TrainRng};
use std::process::ExitCode;
use std::time::Instant;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    shape: StepShape,
    /// Trained parameters: `lora` (adapters + role vectors, as the paper) or `all`.
    #[arg(long, default_value = "lora")]
    trainable: String,
    /// Device: cpu, cuda:N, wgpu:N.
    #[arg(long, default_value = "cpu")]
    devices: DeviceSpec,
    /// The dtype of the step's forward and backward (`[train] precision`): `bf16` runs the DiT's
    /// token path in bf16 on a cast of f32 master weights (any backend with bf16: CPU, CUDA).
    #[arg(long, value_enum, default_value = "f32")]
    precision: Precision,
    /// Timed steps (after one warm-up step).
    #[arg(long, default_value_t = 2)]
    iters: usize,
    /// Activation checkpointing of the backward pass (`[train] checkpointing`): `none` or
    /// `blocks` (each block recomputed in the backward pass). Compare peaks across separate runs:
    /// the allocator keeps freed pages resident.
    #[arg(long, value_enum, default_value = "none")]
    checkpointing: CheckpointingArg,
    /// Context parallelism D (`[train] context_parallel`): measure one device's part of a D-way
    /// sharded step (shard 0, the largest: its frames' forward and backward with the other
    /// shards' all-gathered K/V entering as constants of their size), which is what each device
    /// of the group holds. 1: the whole step.
    #[arg(long, default_value_t = 1)]
    context_parallel: usize,
}

/// The all-gather of shard 0 of a measured context-parallel step: its own K/V followed by
/// zeros of the other shards' size (`others` tokens), so that the step holds what one device of
/// the group holds.
struct OtherShardsAsConstants {
    others: usize,
}

impl<B: AttentionBackend> KvExchange<B> for OtherShardsAsConstants {
    fn all_gather(&self, _: usize, own: LayerKv<B>) -> ff_model::Result<LayerKv<B>> {
        let [b, h, _, d] = own.k.dims();
        let (dtype, device) = (own.k.dtype(), own.k.device());
        let zeros = || Tensor::<B, 4>::zeros([b, h, self.others, d], &device).cast(dtype);
        Ok(LayerKv::cat(vec![own, LayerKv { k: zeros(), v: zeros() }]))
    }
}

/// The loss of shard 0 of a `shards`-way context-parallel packed step over `clip`
/// ([`OtherShardsAsConstants`]).
fn shard_loss<B>(
    model: &WanDit<B>,
    objective: &SftObjective,
    clip: &LatentClip,
    rng: &mut TrainRng,
    shards: usize,
) -> anyhow::Result<Tensor<B, 1>>
where
    B: burn::tensor::backend::AutodiffBackend + AttentionBackend,
{
    let draw = objective.draw(clip, rng)?;
    let layout = objective.layout(&draw.offsets);
    let Packed { inputs, targets, timesteps } = pack::<B>(&clip.latents, None, &draw, &layout, &model.device());
    let text = model.text_context(objective.context(model, clip)?);
    let [_, _, _, h, w] = inputs.dims();
    let [_, ph, pw] = model.config.patch_size;
    let frames = shard_frames(layout.len(), shards).swap_remove(0);
    let exchange = OtherShardsAsConstants { others: (layout.len() - frames.len()) * (h / ph) * (w / pw) };
    let shard = Shard { frames: frames.clone(), exchange: &exchange };
    let mine = inputs.narrow(2, frames.start, frames.len());
    let reads = ShardReads::Packed(&layout.mask);
    let out = model.forward_shard(&shard, mine, &[timesteps[frames.clone()].to_vec()], &layout.frame_layout(), &text, reads)?;
    Ok((out.prediction - targets.narrow(2, frames.start, frames.len())).powi_scalar(2).mean())
}

/// `--checkpointing`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum CheckpointingArg {
    None,
    Blocks,
}

struct Row {
    preset: String,
    frames: usize,
    tokens: usize,
    trainable: usize,
    seconds: f64,
    rss_before: Option<u64>,
    rss_peak: Option<u64>,
}

/// Freezes the backbone, keeping adapters and role vectors trainable.
fn lora_only<B: AttentionBackend>(model: WanDit<B>) -> WanDit<B> {
    let mut m = model.no_grad();
    for b in &mut m.blocks {
        for lin in
            [&mut b.self_attn.q, &mut b.self_attn.k, &mut b.self_attn.v, &mut b.self_attn.o, &mut b.cross_attn.q, &mut b.cross_attn.o]
        {
            for a in &mut lin.adapters {
                a.a = a.a.clone().set_require_grad(true);
                a.b = a.b.clone().set_require_grad(true);
            }
        }
    }
    m.role_embedding = m.role_embedding.map(|p| p.set_require_grad(true));
    m
}

struct Bench<'a> {
    name: &'a str,
    args: &'a Args,
}

impl BackendTask for Bench<'_> {
    type Output = Row;
    fn run<B: AttentionBackend>(self, devices: Vec<B::Device>) -> anyhow::Result<Row> {
        // Inside a worker pool, as the trainer runs each data-parallel group's step.
        let pools = ff_sched::exec::worker_pools(1)?;
        pools[0].install(|| bench::<Autodiff<B>>(self.name, self.args, &devices[0]))
    }
}

fn bench<B>(name: &str, a: &Args, device: &B::Device) -> anyhow::Result<Row>
where
    B: burn::tensor::backend::AutodiffBackend + AttentionBackend,
    B::InnerBackend: AttentionBackend,
{
    // The context is the prompt's `text_tokens`, unpadded, as in `bench dmd` and PyTorch's side
    // (`text_len = text_tokens`); the preset's 512 would give the cross-attention 16× the keys.
    let c = crate::schedule::preset(name)?.with_text_len(a.shape.text_tokens);
    let model: WanDit<B> = c.init::<B>(device).with_roles(&LoraConfig::new(a.shape.lora_rank));
    let mut model = match a.trainable.as_str() {
        "lora" => lora_only(model),
        "all" => model,
        other => anyhow::bail!("--trainable: unknown set '{other}' (lora, all)"),
    };
    let (backbone, roles) = param_counts(&c, a.shape.lora_rank);
    let trainable = if a.trainable == "all" { backbone + roles } else { roles };
    let objective = SftObjective::new(SftConfig::new().with_latents(a.shape.latents))?;
    let mut rng = TrainRng::new(0);
    let clip = LatentClip {
        latents: rng.normal_data(vec![c.in_channels, a.shape.latents, a.shape.height, a.shape.width]),
        prompt: rng.normal_data(vec![a.shape.text_tokens, c.text_dim]),
        crops: None,
        caption: "random".into(),
    };
    let frames = objective.layout(&objective.draw(&clip, &mut rng.clone())?.offsets).len();
    let mut optim =
        AdamWConfig::new().with_beta_1(0.0).with_beta_2(0.999).with_weight_decay(0.01).with_epsilon(1e-8).init::<B, WanDit<B>>();
    // The trainer's form of the step (unsharded: context parallelism is measured by `shard_loss`).
    let form = TrainConfig::new()
        .with_precision(match a.precision {
            Precision::F32 => TrainPrecision::F32,
            Precision::Bf16 => TrainPrecision::Bf16,
        })
        .with_checkpointing(match a.checkpointing {
            CheckpointingArg::None => Checkpointing::None,
            CheckpointingArg::Blocks => Checkpointing::Blocks,
        });
    let mut step = |model: WanDit<B>| -> anyhow::Result<WanDit<B>> {
        let compute = model.for_step(&form, std::slice::from_ref(device))?;
        let loss = match a.context_parallel {
            0 | 1 => objective.loss(&compute, &clip, &mut rng)?.total,
            shards => shard_loss(&compute, &objective, &clip, &mut rng, shards)?,
        };
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        let model = optim.step(1e-5, model, grads);
        B::sync(device).map_err(|e| anyhow::anyhow!("device sync: {e:?}"))?;
        Ok(model)
    };
    model = step(model)?;
    let cpu = a.devices.is_host();
    let rss_before = cpu.then(|| proc_status("VmRSS:")).flatten();
    if cpu {
        // "5" resets the peak resident set size (VmHWM) to the current RSS.
        std::fs::write("/proc/self/clear_refs", "5").map_err(|e| anyhow::anyhow!("/proc/self/clear_refs: {e}"))?;
    }
    let t = Instant::now();
    for _ in 0..a.iters {
        model = step(model)?;
    }
    let seconds = t.elapsed().as_secs_f64() / a.iters as f64;
    let [_, ph, pw] = c.patch_size;
    Ok(Row {
        preset: name.to_string(),
        frames,
        tokens: frames * (a.shape.height / ph) * (a.shape.width / pw),
        trainable,
        seconds,
        rss_before,
        rss_peak: cpu.then(|| proc_status("VmHWM:")).flatten(),
    })
}

/// What the paper's layout needs on one device at the 1.3B shape; see the module docs.
struct Plan {
    rows: Vec<(String, u64)>,
}

impl Plan {
    fn new(c: &DitConfig, rank: usize, height: usize, width: usize) -> anyhow::Result<(Self, String)> {
        let objective = SftObjective::new(SftConfig::new())?;
        let layout = objective.layout(&[1, 4, 6, 9]);
        let [_, ph, pw] = c.patch_size;
        let per_frame = (height / ph) * (width / pw);
        let (frames, n) = (layout.len() as u64, (layout.len() * per_frame) as u64);
        let (backbone, roles) = param_counts(c, rank);
        let (backbone, roles) = (backbone as u64, roles as u64);
        let (d, f, heads, layers) = (c.dim as u64, c.ffn_dim as u64, c.num_heads as u64, c.num_layers as u64);
        let allowed: u64 = (0..layout.len()).map(|q| (0..layout.len()).filter(|&k| layout.mask.is_allowed(q, k)).count() as u64).sum();
        let pair = (per_frame * per_frame) as u64;
        let layer_acts = (33 * n * d + 2 * n * f) * 2;
        let mut rows = vec![
            (format!("backbone weights, bf16 ({:.2} B params)", backbone as f64 / 1e9), backbone * 2),
            (format!("LoRA rank {rank} ×2 roles + role vectors, f32 ({:.0} M params)", roles as f64 / 1e6), roles * 4),
            ("gradients of LoRA + roles, f32".into(), roles * 4),
            ("AdamW moments of LoRA + roles, 2 × f32".into(), roles * 8),
            ("EMA of LoRA + roles, f32".into(), roles * 4),
            (format!("activations of one layer, bf16 (≈ 33·N·dim + 2·N·ffn, N = {n} tokens)"), layer_acts),
            (format!("activations of all {layers} layers, no checkpointing"), layers * layer_acts),
            ("activations with per-layer checkpointing (inputs + one layer)".into(), layers * n * d * 2 + layer_acts),
            ("dense token mask, bool (what a token-level mask would take)".into(), n * n),
            ("dense attention scores of one layer, f32 (all heads)".into(), heads * n * n * 4),
            (
                format!("scores of the allowed frame pairs only, one layer, f32 ({allowed} of {} pairs)", frames * frames),
                heads * allowed * pair * 4,
            ),
        ];
        let fixed = backbone * 2 + roles * 20;
        let checkpointed = layers * n * d * 2 + layer_acts;
        // Context parallelism over D devices (`ff_model::dit::parallel`): weights and optimizer
        // state replicated, activations split by whole frames, plus (D > 1) the all-gathered K/V
        // of the layer in flight (each shard holds the whole sequence's K and V, bf16), kept for
        // every layer when nothing is recomputed.
        let gathered = 2 * n * d * 2;
        let per_device = |shards: u64, all_layers: bool| {
            let gathered = if shards > 1 { gathered } else { 0 };
            match all_layers {
                true => fixed + layers * (layer_acts / shards + gathered),
                false => fixed + checkpointed / shards + gathered,
            }
        };
        let fits = |all_layers: bool| (1..=64u64).find(|&s| per_device(s, all_layers) <= 80 * 1_000_000_000);
        rows.push(("all-gathered K/V of one layer on each context-parallel shard, bf16".into(), gathered));
        let smallest = |all_layers| fits(all_layers).map_or("none up to 64".to_string(), |s| format!("D = {s}"));
        for (all_layers, how) in [(false, "per-layer checkpointing"), (true, "all layers kept")] {
            for shards in [1u64, 2, 4, 8, 16] {
                rows.push((format!("per device, context-parallel over D = {shards}, {how}"), per_device(shards, all_layers)));
            }
            rows.push((
                format!("smallest D within 80 GB, {how}: {}", smallest(all_layers)),
                per_device(fits(all_layers).unwrap_or(64), all_layers),
            ));
        }
        let title = format!(
            "memory plan of the paper's layout: {} preset, L = 81, {frames} packed frames × {per_frame} tokens ({height}×{width} latents), one clip per device",
            if c == &DitConfig::wan_t2v_1_3b() { "1.3b".to_string() } else { format!("dim {}", c.dim) }
        );
        Ok((Self { rows }, title))
    }
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    println!(
        "one Phase 1 step (packed forward + backward + AdamW) on {} ({:?}, checkpointing {:?}{}): L = {}, {}×{} latents, {} text tokens, LoRA rank {}, trainable: {}",
        a.devices,
        a.precision,
        a.checkpointing,
        match a.context_parallel {
            0 | 1 => String::new(),
            d => format!(", one device's part of a {d}-way context-parallel step"),
        },
        a.shape.latents,
        a.shape.height,
        a.shape.width,
        a.shape.text_tokens,
        a.shape.lora_rank,
        a.trainable
    );
    println!("| preset | packed frames | tokens | trainable params | seconds/step | steps/s | RSS before step | peak RSS during step |");
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    let mem = |b: Option<u64>| b.map_or("-".to_string(), gib);
    for name in &a.shape.configs {
        let r = dispatch(&a.devices, Precision::F32, Bench { name, args: &a })?;
        println!(
            "| {} | {} | {} | {} | {:.3} | {:.3} | {} | {} |",
            r.preset,
            r.frames,
            r.tokens,
            r.trainable,
            r.seconds,
            1.0 / r.seconds,
            mem(r.rss_before),
            mem(r.rss_peak)
        );
    }
    let (plan, title) = Plan::new(&DitConfig::wan_t2v_1_3b(), 256, 60, 104)?;
    println!("\n{title}");
    println!("| part | bytes |");
    println!("| --- | ---: |");
    for (what, bytes) in plan.rows {
        println!("| {what} | {} |", gib(bytes));
    }
    super::scale::print_phase1()?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::NdArray;

    #[test]
    fn parameter_arithmetic_counts_the_model() {
        let c = DitConfig::tiny();
        let plain: WanDit<NdArray> = c.init(&Default::default());
        let (backbone, roles) = param_counts(&c, 4);
        assert_eq!(plain.num_params(), backbone);
        assert_eq!(plain.with_roles(&LoraConfig::new(4)).num_params(), backbone + roles);
    }
}
