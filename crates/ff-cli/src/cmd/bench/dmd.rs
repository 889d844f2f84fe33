//! `flashforward bench dmd`: one Phase 2 generator step and one critic step (`ff_train::dmd`,
//! batch 1) of random-weight presets on random prompts: seconds per step and, on the CPU, the
//! process's peak resident memory during each step (`VmHWM` reset through
//! `/proc/self/clear_refs`; it includes the weights and optimizer state already held). Steps run
//! at the last exit stage (`k* = S − 1`, the most forwards). The teacher and the critic's base
//! are the student's preset; the score window defaults to `L` (no image heads: the VAE is not
//! what is measured). Then the memory plan at the paper's scale by arithmetic (see [`plan`]).

use super::{StepShape, gib, param_counts, proc_status};
use crate::backend::{BackendTask, DeviceSpec, Precision, dispatch};
use burn::backend::Autodiff;
use ff_model::vae::WanVaeConfig;
use ff_model::{AttentionBackend, DitConfig, LoraConfig, WanDit};
use ff_train::TrainRng;
use ff_train::data::{InMemoryClips, LatentClip};
use ff_train::dmd::{DmdConfig, DmdShared, DmdTrainer};
use std::process::ExitCode;
use std::time::Instant;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    shape: StepShape,
    /// Score window W_score (default: L).
    #[arg(long)]
    score_window: Option<usize>,
    /// Device: cpu, cuda:N, wgpu:N.
    #[arg(long, default_value = "cpu")]
    devices: DeviceSpec,
    /// Timed steps of each kind (after one warm-up step of each).
    #[arg(long, default_value_t = 1)]
    iters: usize,
}

/// Seconds and peak RSS of one kind of step.
struct Timing {
    seconds: f64,
    rss_peak: Option<u64>,
}

struct Row {
    preset: String,
    generator: Timing,
    critic: Timing,
    rss_before: Option<u64>,
}

struct Bench<'a> {
    name: &'a str,
    args: &'a Args,
}

impl BackendTask for Bench<'_> {
    type Output = Row;
    fn run<B: AttentionBackend>(self, devices: Vec<B::Device>) -> anyhow::Result<Row> {
        bench::<B>(self.name, self.args, &devices[0])
    }
}

fn bench<B: AttentionBackend>(name: &str, a: &Args, device: &B::Device) -> anyhow::Result<Row> {
    let c = crate::schedule::preset(name)?.with_text_len(a.shape.text_tokens);
    let lora = LoraConfig::new(a.shape.lora_rank).with_alpha(a.shape.lora_rank as f64);
    let student = c.init::<Autodiff<B>>(device).with_roles(&lora);
    let critic = c.init::<Autodiff<B>>(device);
    let teacher: WanDit<B> = c.init(device);
    let vae = WanVaeConfig::new(8, 16, vec![1, 2, 4, 4], 1, vec![], vec![false, true, true], vec![0.0; 16], vec![1.0; 16]).init(device);
    let dmd = DmdConfig::new()
        .with_latents(a.shape.latents)
        .with_score_window(a.score_window.unwrap_or(a.shape.latents))
        .with_critic_lora_rank(a.shape.lora_rank)
        .with_critic_lora_alpha(a.shape.lora_rank as f64);
    let stages = dmd.stages;
    let mut rng = TrainRng::new(0);
    let empty = rng.normal_data(vec![2, c.text_dim]);
    let clip = LatentClip {
        latents: rng.normal_data(vec![c.in_channels, 1, a.shape.height, a.shape.width]),
        prompt: rng.normal_data(vec![a.shape.text_tokens, c.text_dim]),
        crops: None,
        caption: "random".into(),
    };
    let data = InMemoryClips(vec![clip]);
    let train = DmdConfig::generator_defaults().with_batch(1).with_lora_rank(a.shape.lora_rank).with_lora_alpha(a.shape.lora_rank as f64);
    let shared = DmdShared::new(dmd, teacher, vae, empty, None)?;
    let mut trainer = DmdTrainer::new(train, student, vec![device.clone()], critic, vec![device.clone()], shared, 1)?;
    let cpu = a.devices.is_host();
    let sync = || B::sync(device).map_err(|e| anyhow::anyhow!("device sync: {e:?}"));
    trainer.generator_step(&data, stages - 1)?;
    trainer.critic_step(&data, stages - 1)?;
    sync()?;
    let rss_before = cpu.then(|| proc_status("VmRSS:")).flatten();
    let time = |step: &mut dyn FnMut() -> anyhow::Result<()>| -> anyhow::Result<Timing> {
        if cpu {
            // "5" resets the peak resident set size (VmHWM) to the current RSS.
            std::fs::write("/proc/self/clear_refs", "5").map_err(|e| anyhow::anyhow!("/proc/self/clear_refs: {e}"))?;
        }
        let t = Instant::now();
        for _ in 0..a.iters {
            step()?;
        }
        sync()?;
        Ok(Timing { seconds: t.elapsed().as_secs_f64() / a.iters as f64, rss_peak: cpu.then(|| proc_status("VmHWM:")).flatten() })
    };
    let generator = time(&mut || Ok(trainer.generator_step(&data, stages - 1).map(|_| ())?))?;
    let critic = time(&mut || Ok(trainer.critic_step(&data, stages - 1).map(|_| ())?))?;
    Ok(Row { preset: name.to_string(), generator, critic, rss_before })
}

/// The memory plan of one Phase 2 device holding everything (no sharding, no offload) at the
/// paper's scale: 1.3B student (every parameter trains: bf16 weights plus f32 master copy,
/// gradient, two AdamW moments and EMA), 1.3B critic (bf16 base, LoRA rank 256 on the two role
/// slots with f32 gradient, moments, EMA), 14B teacher (bf16, frozen), L = 81 at 480p
/// (60×104 latents, 1,560 tokens per frame). Activations saved for backward per layer with `N`
/// tokens: ≈ 33·N·dim + 2·N·ffn in bf16 (as `bench train`); score forwards keep nothing.
fn plan() -> Vec<(String, u64)> {
    let (student, teacher) = (DitConfig::wan_t2v_1_3b(), DitConfig::wan_t2v_14b());
    let (backbone, roles) = param_counts(&student, 256);
    let (b14, _) = param_counts(&teacher, 256);
    let (backbone, roles, b14) = (backbone as u64, roles as u64, b14 as u64);
    let per_frame = 60 / 2 * (104 / 2);
    let (d, f, layers) = (student.dim as u64, student.ffn_dim as u64, student.num_layers as u64);
    let layer = |n: u64, d: u64, f: u64| (33 * n * d + 2 * n * f) * 2;
    // Exit-stage renderer forward: 81 positions; the anchor bank (9 anchors) is read as K/V.
    let render = 81 * per_frame;
    let window = 21 * per_frame;
    let bank = 9 * per_frame * layers * 2 * d * 2;
    let kt = teacher.dim as u64;
    vec![
        (
            format!("student weights, bf16 + f32 master ({:.2} B params incl. roles)", (backbone + roles) as f64 / 1e9),
            (backbone + roles) * 6,
        ),
        ("student gradients, AdamW moments, EMA (f32, 4 per param)".into(), (backbone + roles) * 16),
        ("critic base weights, bf16".into(), backbone * 2),
        (format!("critic LoRA rank 256 ×2 slots ({:.0} M params), f32 weights + gradient + moments + EMA", roles as f64 / 1e6), roles * 20),
        (format!("teacher weights, bf16 ({:.1} B params)", b14 as f64 / 1e9), b14 * 2),
        (format!("generator: exit-stage renderer activations, one layer (N = {render} tokens)"), layer(render, d, f)),
        (format!("generator: all {layers} layers, no checkpointing"), layers * layer(render, d, f)),
        ("generator: per-layer checkpointing (layer inputs + one layer)".into(), layers * render * d * 2 + layer(render, d, f)),
        ("generator: anchor bank K/V at the exit stage (9 anchors, all layers), bf16".into(), bank),
        (format!("scores: teacher forward transient, one layer (N = {window}, no grad)"), layer(window, kt, teacher.ffn_dim as u64)),
        (
            format!("critic step: critic activations with LoRA grads, all layers (N = {window}), no checkpointing"),
            layers * layer(window, d, f),
        ),
        ("critic step: per-layer checkpointing".into(), layers * window * d * 2 + layer(window, d, f)),
    ]
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    println!(
        "one Phase 2 generator step and one critic step (k* = S − 1, batch 1) on {:?}: L = {}, {}×{} latents, {} text tokens, LoRA rank {}",
        a.devices, a.shape.latents, a.shape.height, a.shape.width, a.shape.text_tokens, a.shape.lora_rank
    );
    println!("| preset | generator s/step | generator peak RSS | critic s/step | critic peak RSS | RSS before steps |");
    println!("| --- | ---: | ---: | ---: | ---: | ---: |");
    let mem = |b: Option<u64>| b.map_or("-".to_string(), gib);
    for name in &a.shape.configs {
        let r = dispatch(&a.devices, Precision::F32, Bench { name, args: &a })?;
        println!(
            "| {} | {:.3} | {} | {:.3} | {} | {} |",
            r.preset,
            r.generator.seconds,
            mem(r.generator.rss_peak),
            r.critic.seconds,
            mem(r.critic.rss_peak),
            mem(r.rss_before)
        );
    }
    println!(
        "\nmemory plan of Phase 2 at the paper's scale (1.3B student and critic, 14B teacher, L = 81, 480p), one device holding everything"
    );
    println!("| part | bytes |");
    println!("| --- | ---: |");
    for (what, bytes) in plan() {
        println!("| {what} | {} |", gib(bytes));
    }
    Ok(ExitCode::SUCCESS)
}
