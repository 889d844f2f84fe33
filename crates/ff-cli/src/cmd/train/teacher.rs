//! `flashforward train teacher --model-dir DIR --data DATA --out RUN --steps N --seed S
//! [--config FILE] [--resume]`: the small world's teacher. A bidirectional DiT of the `[teacher]`
//! preset (`tiny-world`) starts from random weights, every parameter trains, with plain flow
//! matching on whole clips and text dropout (`ff_train::teacher`); DIR is the small world's model
//! directory, whose text encoder gives the empty-prompt embedding. Conventions as `train sft`
//! (flags override the config file; `--resume`; progress, metrics.jsonl, loss.svg, Ctrl-C).
//!
//! At the end the EMA weights are exported to `RUN/transformer/{config.json,
//! diffusion_pytorch_model.safetensors}`, the layout `generate --model-dir` reads (copy the folder
//! into the model directory).

use super::config::{RunConfig, RunFlags};
use super::run::{AnyBackendObjective, Session, train};
use crate::backend::{CpuBackend, cpu_device};
use crate::cmd::world::files::WorldDir;
use crate::video::write_atomic;
use anyhow::{Context, Result, bail};
use burn::backend::Autodiff;
use ff_model::{AttentionBackend, WanDit};
use ff_train::data::LatentClip;
use ff_train::engine::{TrainConfig, Trainable};
use ff_train::teacher::{TeacherConfig, TeacherObjective};
use ff_train::{Loss, Objective, TrainRng};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The config section of the objective.
const SECTION: &str = "teacher";

/// The engine's defaults for a small model trained from scratch on a CPU (the paper's are for
/// LoRA fine-tuning of 1.3B): every parameter, AdamW with momentum, LR 5e-4 after 100 warm-up steps,
/// batch 8, EMA 0.995, a checkpoint every 100 steps.
fn default_train() -> TrainConfig {
    TrainConfig::new()
        .with_trainable(Trainable::All)
        .with_steps(3000)
        .with_lr(5e-4)
        .with_warmup_steps(100)
        .with_beta_1(0.9)
        .with_batch(8)
        .with_ema_decay(0.995)
        .with_checkpoint_every(100)
}

impl AnyBackendObjective for TeacherObjective {
    fn loss<B: AttentionBackend>(
        &self,
        model: &WanDit<Autodiff<B>>,
        clip: &LatentClip,
        rng: &mut TrainRng,
    ) -> ff_train::Result<Loss<Autodiff<B>>> {
        Objective::loss(self, model, clip, rng)
    }
}

#[derive(clap::Args)]
pub struct Args {
    /// Small-world model directory: its text encoder and tokenizer give the empty prompt.
    #[arg(long)]
    model_dir: Option<PathBuf>,
    /// Latent-clip dataset written by `world-latents` (or `encode-videos`).
    #[arg(long)]
    data: Option<PathBuf>,
    #[command(flatten)]
    run: RunFlags,
}

pub fn run(args: Args) -> Result<ExitCode> {
    let mut config = RunConfig::defaults(SECTION, TeacherConfig::new());
    config.train = default_train();
    let config = config.with_flags(&args.run, &args.model_dir, &args.data)?;
    let dit = config.objective.dit_config().context("[teacher]")?;
    let Some(out) = config.paths.out.clone() else { bail!("no run directory: pass --out RUN or set `out` in the config") };
    let Some(model_dir) = config.paths.model_dir.clone() else { bail!("no model: pass --model-dir DIR or set `model_dir` in the config") };
    let text = WorldDir(model_dir).text(dit.text_len)?;
    let empty = text.embed::<CpuBackend>(&[""], None, &cpu_device())?.remove(0).data;
    let objective = TeacherObjective::new(&config.objective, empty).context("[teacher]")?;
    let session = Session::prepare(config, out.clone(), args.run.resume, Some(dit.clone()))?;
    let code = train(session, objective)?;
    if code == ExitCode::SUCCESS {
        let dir = export(&dit, &out)?;
        println!("{}", dir.display());
    }
    Ok(code)
}

/// Writes the newest checkpoint's EMA weights of `run` as `run/transformer/` (diffusers layout
/// of `generate --model-dir`: `config.json` in Wan's field names, weights in Wan keys); returns it.
pub fn export(dit: &ff_model::DitConfig, run: &Path) -> Result<PathBuf> {
    let model = ff_train::checkpoint::load_dit::<CpuBackend>(dit, run, &cpu_device())?;
    let dir = run.join("transformer");
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let json = serde_json::json!({
        "_class_name": "WanModel",
        "model_type": "t2v",
        "patch_size": dit.patch_size,
        "in_dim": dit.in_channels,
        "out_dim": dit.out_channels,
        "dim": dit.dim,
        "ffn_dim": dit.ffn_dim,
        "freq_dim": dit.freq_dim,
        "text_dim": dit.text_dim,
        "text_len": dit.text_len,
        "num_heads": dit.num_heads,
        "num_layers": dit.num_layers,
        "eps": dit.eps,
        "rope_max_seq_len": dit.rope_max_positions,
        "qk_norm": true,
        "cross_attn_norm": true,
    });
    write_atomic(&dir.join("config.json"), |w| Ok(serde_json::to_writer_pretty(w, &json)?))?;
    let weights = dir.join("diffusion_pytorch_model.safetensors");
    let metadata = HashMap::from([("format".to_string(), "pt".to_string())]);
    ff_train::checkpoint::write_tensors(&weights, model.file_tensors(|_| true)?, metadata)?;
    Ok(dir)
}
