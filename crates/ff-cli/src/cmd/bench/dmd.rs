//! `flashforward bench dmd`: one Phase 2 generator step and one critic step (`ff_train::dmd`,
//! batch 1) of random-weight presets on random prompts: seconds per step and, on the CPU, the
//! process's peak resident memory during each step (`VmHWM` reset through
//! `/proc/self/clear_refs`; it includes the weights and optimizer state already held). Steps run
//! at the last exit stage (`k* = S − 1`, the most forwards). The teacher and the critic's base
//! are the student's preset; the score window defaults to `L` (no image heads: the VAE is not
//! what is measured). Then the memory plan at the paper's scale by arithmetic ([`super::scale`]).

use super::{StepShape, gib, proc_status};
use crate::backend::{BackendTask, DeviceSpec, Precision, dispatch};
use burn::backend::Autodiff;
use ff_model::vae::WanVaeConfig;
use ff_model::{AttentionBackend, LoraConfig, WanDit};
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
    super::scale::print_phase2()?;
    Ok(ExitCode::SUCCESS)
}
