//! `flashforward bench train`: one Phase 1 step (packed forward + backward + Burn AdamW step with
//! the paper's values) of random-weight presets on random latents: steps/s and, on the CPU, the
//! process's peak resident memory during the step (`VmHWM` after resetting it through
//! `/proc/self/clear_refs`: it includes the weights and optimizer state already held). Then the
//! memory plan of the paper's layout at the 1.3B shape, by arithmetic.
//!
//! The plan is [`super::scale`]'s (Phase 1 at 1.3B / 480p for each precision, checkpointing
//! and device count). Beside it, the attention this layout needs at that shape: the dense token
//! mask and scores a token-level implementation would build, against the scores of the allowed
//! frame pairs only.

use super::{StepShape, gib, param_counts, proc_status};
use crate::backend::{BackendTask, DeviceSpec, Precision, dispatch};
use burn::backend::Autodiff;
use burn::module::Module;
use burn::optim::{AdamWConfig, GradientsParams, Optimizer};
use ff_model::AttentionBackend;
use ff_model::dit::{DitConfig, WanDit};
use ff_model::lora::LoraConfig;
use ff_train::data::LatentClip;
use ff_train::sft::{SftConfig, SftObjective};
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
    #[arg(long, value_enum, default_value = "f32")]
    precision: Precision,
    /// Timed steps (after one warm-up step).
    #[arg(long, default_value_t = 2)]
    iters: usize,
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
        bench::<Autodiff<B>>(self.name, self.args, &devices[0])
    }
}

fn bench<B>(name: &str, a: &Args, device: &B::Device) -> anyhow::Result<Row>
where
    B: burn::tensor::backend::AutodiffBackend + AttentionBackend,
    B::InnerBackend: AttentionBackend,
{
    let c = crate::schedule::preset(name)?;
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
        caption: "random".into(),
    };
    let frames = objective.layout(&objective.draw(&clip, &mut rng.clone())?.offsets).len();
    let mut optim =
        AdamWConfig::new().with_beta_1(0.0).with_beta_2(0.999).with_weight_decay(0.01).with_epsilon(1e-8).init::<B, WanDit<B>>();
    let mut step = |model: WanDit<B>| -> anyhow::Result<WanDit<B>> {
        let loss = objective.loss(&model, &clip, &mut rng)?;
        let grads = GradientsParams::from_grads(loss.total.backward(), &model);
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

/// The attention of the packed layout at the 1.3B shape and 480p, one layer: (what, bytes).
fn attention() -> anyhow::Result<Vec<(String, u64)>> {
    let c = DitConfig::wan_t2v_1_3b();
    let layout = SftObjective::new(SftConfig::new())?.layout(&[1, 4, 6, 9]);
    let [_, ph, pw] = c.patch_size;
    let per_frame = (60 / ph) * (104 / pw);
    let (frames, n) = (layout.len() as u64, (layout.len() * per_frame) as u64);
    let heads = c.num_heads as u64;
    let allowed: u64 = (0..layout.len()).map(|q| (0..layout.len()).filter(|&k| layout.mask.is_allowed(q, k)).count() as u64).sum();
    let pair = (per_frame * per_frame) as u64;
    Ok(vec![
        (format!("dense token mask, bool (N = {n} tokens)"), n * n),
        ("dense attention scores, f32 (all heads)".into(), heads * n * n * 4),
        (format!("scores of the allowed frame pairs only, f32 ({allowed} of {} pairs)", frames * frames), heads * allowed * pair * 4),
    ])
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    println!(
        "one Phase 1 step (packed forward + backward + AdamW) on {} ({:?}): L = {}, {}×{} latents, {} text tokens, LoRA rank {}, trainable: {}",
        a.devices, a.precision, a.shape.latents, a.shape.height, a.shape.width, a.shape.text_tokens, a.shape.lora_rank, a.trainable
    );
    println!("| preset | packed frames | tokens | trainable params | seconds/step | steps/s | RSS before step | peak RSS during step |");
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    let mem = |b: Option<u64>| b.map_or("-".to_string(), gib);
    for name in &a.shape.configs {
        let r = dispatch(&a.devices, a.precision, Bench { name, args: &a })?;
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
    super::scale::print_phase1()?;
    println!("\nattention of one layer of that layout (what the block-sparse kernel avoids)");
    println!("| part | bytes |");
    println!("| --- | ---: |");
    for (what, bytes) in attention()? {
        println!("| {what} | {} |", gib(bytes));
    }
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
