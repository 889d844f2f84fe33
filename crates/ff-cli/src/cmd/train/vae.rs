//! `flashforward train vae --out RUN --steps N --seed S [--config FILE] [--resume]`: the small
//! world's codec, a Wan VAE (`WanVaeConfig::tiny_world` by default) trained as a β-VAE on clips
//! the procedural domain renders on the fly (`ff_train::vae`): no dataset on disk, every step
//! sees fresh scenes and time windows. Same conventions as `train sft`: flags override the config
//! file, `[train]` holds the engine's keys and `[vae]` the codec's (`model`, `clips`, `loss`,
//! `stats_clips`, `initial_logvar`), checkpoints every `checkpoint_every` steps, Ctrl-C checkpoints and exits 130,
//! `--resume` continues from the newest checkpoint. `--model-dir DIR` starts from an exported
//! codec instead of random weights (a fresh run: new optimizer state and schedule; its posterior
//! keeps the trained log-variance, `initial_logvar` does not apply), so a run on single cropped
//! frames can be followed by one on 41-frame clips; `[vae] inflate = true` first turns the image
//! codec into a video codec that codes each frame as the image codec does; `[vae] new_decoder`
//! with `trainable = "decoder"` trains a new (wider) decoder on the starting codec's frozen
//! encoder; `[vae] interpolate_time` makes the starting decoder blend latents where it held them.
//! A finished run exports its EMA weights to `RUN/vae/` (`config.json` with the latent
//! mean/std, measured, or the starting codec's for a decoder-only run, and
//! `diffusion_pytorch_model.safetensors`), the layout `generate --vae` and `encode-videos` read.

use super::config::{RunConfig, RunFlags};
use super::run::{Steps, drive, resume_checkpoint, save_effective_config};
use crate::backend::{BackendTask, DeviceSpec, Precision, dispatch};
use crate::cmd::vae::export::{EXPORT_DIR, LatentStats, WEIGHTS_FILE, export};
use anyhow::{Context, Result, bail};
use burn::backend::Autodiff;
use burn::tensor::backend::Backend;
use ff_model::AttentionBackend;
use ff_model::vae::{WanVae, WanVaeConfig};
use ff_train::checkpoint::{Stored, restore_module, save_module};
use ff_train::data::ClipSource;
use ff_train::engine::{StepReport, TrainConfig, Trainable, Trainer};
use ff_train::vae::{VaeObjective, VaeObjectiveConfig, WorldClips, WorldClipsConfig, inflate_time, interpolate_time, with_initial_logvar};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The config section of the codec.
const SECTION: &str = "vae";

/// `[vae]`: the codec's architecture, its training clips and loss weights.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VaeSection {
    /// Architecture (`latents_mean` / `latents_std` are measured at export).
    pub model: WanVaeConfig,
    /// The procedural clips it trains on.
    pub clips: WorldClipsConfig,
    /// Weights of L1, MSE and KL.
    pub loss: VaeObjectiveConfig,
    /// Held-out clips whose latents give the exported `latents_mean` / `latents_std`.
    pub stats_clips: usize,
    /// Initial bias of the posterior's log-variance channels (`ff_train::vae::with_initial_logvar`);
    /// 0 leaves the random initialisation's σ ≈ 1.
    #[serde(default)]
    pub initial_logvar: f64,
    /// With `--model-dir`: inflate the starting codec's temporal taps
    /// (`ff_train::vae::inflate_time`), for a video run that follows a run on single frames.
    /// Only the parameters the run trains are inflated (`trainable = "decoder"`: the decoder).
    #[serde(default)]
    pub inflate: bool,
    /// With `--model-dir`: keep only the starting codec's encoder side (encoder, `quant_conv`,
    /// latent statistics) and start the decoder of `[vae.model]` (its `decoder_base_dim`) from
    /// random weights; with `trainable = "decoder"` the latent space a DiT was trained in stays.
    #[serde(default)]
    pub new_decoder: bool,
    /// With `--model-dir`: make the starting decoder's time upsampling interpolate between
    /// latents instead of holding each one (`ff_train::vae::interpolate_time`; after `inflate`).
    #[serde(default)]
    pub interpolate_time: bool,
}

impl Default for VaeSection {
    fn default() -> Self {
        Self {
            model: WanVaeConfig::tiny_world(),
            clips: WorldClipsConfig::new(),
            loss: VaeObjectiveConfig::new(),
            stats_clips: 32,
            initial_logvar: -6.0,
            inflate: false,
            new_decoder: false,
            interpolate_time: false,
        }
    }
}

/// The engine's defaults for the codec (a plain module trained from scratch: every parameter,
/// Adam with momentum, a learning rate for random initialisation).
pub fn train_defaults() -> TrainConfig {
    TrainConfig::new()
        .with_trainable(Trainable::All)
        .with_steps(3000)
        .with_lr(2e-3)
        .with_warmup_steps(50)
        .with_beta_1(0.9)
        .with_beta_2(0.99)
        .with_weight_decay(0.0)
        .with_ema_decay(0.99)
        .with_batch(2)
        .with_checkpoint_every(50)
}

#[derive(clap::Args)]
pub struct Args {
    /// An exported codec (`config.json` + `diffusion_pytorch_model.safetensors`, e.g. an earlier
    /// run's `RUN/vae/`) whose weights start this run; its architecture must be `[vae.model]`'s.
    #[arg(long)]
    model_dir: Option<PathBuf>,
    #[command(flatten)]
    run: RunFlags,
}

/// The codec in `dir`, checked against the run's architecture (latent statistics aside, and the
/// decoder width when the run starts a new decoder).
fn starting_codec(dir: &Path, section: &VaeSection) -> Result<WanVaeConfig> {
    let path = dir.join("config.json");
    let found = WanVaeConfig::from_json(&path).with_context(|| format!("reading the starting codec {}", path.display()))?;
    let model = &section.model;
    let decoder_base_dim = if section.new_decoder { model.decoder_base_dim } else { found.decoder_base_dim };
    let same = WanVaeConfig {
        latents_mean: model.latents_mean.clone(),
        latents_std: model.latents_std.clone(),
        decoder_base_dim,
        ..found.clone()
    };
    if &same != model {
        bail!("the starting codec {} is not the run's architecture `[vae.model]`:\n  {found:?}\n  {model:?}", path.display());
    }
    Ok(found)
}

pub fn run(args: Args) -> Result<ExitCode> {
    let mut config = RunConfig::defaults(SECTION, VaeSection::default());
    config.train = train_defaults();
    let config = config.with_flags(&args.run, &args.model_dir, &None)?;
    if config.paths.data.is_some() {
        bail!("train vae renders its clips: `data` is not used");
    }
    match &config.paths.model_dir {
        Some(dir) => {
            starting_codec(dir, &config.objective)?;
        }
        None if config.objective.inflate => bail!("`[vae] inflate = true` needs a starting codec: pass --model-dir DIR"),
        None if config.objective.new_decoder => bail!("`[vae] new_decoder = true` needs a starting codec: pass --model-dir DIR"),
        None if config.objective.interpolate_time => {
            bail!("`[vae] interpolate_time = true` needs a starting codec: pass --model-dir DIR")
        }
        None => {}
    }
    if config.train.trainable == Trainable::Decoder && config.paths.model_dir.is_none() {
        bail!("`trainable = \"decoder\"` freezes the encoder, so it needs a trained codec to start from: pass --model-dir DIR");
    }
    let Some(out) = config.paths.out.clone() else { bail!("no run directory: pass --out RUN or set `out` in the config") };
    let devices: DeviceSpec = config.paths.devices.parse()?;
    config.train.validate()?;
    config.train.accumulation(devices.count())?;
    config.objective.model.validate().context("[vae.model]")?;
    let objective = VaeObjective::new(config.objective.loss.clone()).context("[vae.loss]")?;
    let clips = WorldClips::new(config.objective.clips.clone()).context("[vae.clips]")?;
    let resume = resume_checkpoint(&out, args.run.resume)?;
    save_effective_config(&config, &out)?;
    dispatch(&devices, Precision::F32, TrainVae { config, out, resume, objective, clips })
}

struct TrainVae {
    config: RunConfig<VaeSection>,
    out: PathBuf,
    resume: Option<PathBuf>,
    objective: VaeObjective,
    clips: WorldClips,
}

impl BackendTask for TrainVae {
    type Output = ExitCode;

    fn run<B: AttentionBackend>(self, devices: Vec<B::Device>) -> Result<ExitCode> {
        let TrainVae { config, out, resume, objective, clips } = self;
        let section = &config.objective;
        Autodiff::<B>::seed(&devices[0], config.train.seed);
        let model = match &config.paths.model_dir {
            Some(dir) => {
                let mut vae = WanVae::load(dir.join(WEIGHTS_FILE), &starting_codec(dir, section)?, &devices[0])?;
                if section.new_decoder {
                    vae = vae.with_new_decoder(section.model.decoder_width(), &devices[0]);
                }
                if section.inflate {
                    vae = inflate_time(vae, config.train.trainable);
                }
                if section.interpolate_time { interpolate_time(vae) } else { vae }
            }
            None => with_initial_logvar(section.model.init::<Autodiff<B>>(&devices[0]), section.initial_logvar),
        };
        // The codec's own config: with --model-dir it carries the starting codec's latent
        // statistics, which a decoder-only run exports unchanged.
        let described = serde_json::to_value(model.config())?;
        let mut trainer = Trainer::for_module(config.train.clone(), model, devices, clips.len())?;
        if let Some(dir) = &resume {
            restore_module(&mut trainer, dir, &described)?;
            eprintln!("resumed from {} after step {}", dir.display(), trainer.step_count());
        }
        let c = &config.train;
        let mut engine = Codec { trainer, objective: &objective, described };
        let code = drive(&out, c.steps, c.checkpoint_every, &clips, &mut engine)?;
        if code != ExitCode::SUCCESS {
            return Ok(code);
        }
        let dir = out.join(EXPORT_DIR);
        let stats = match config.train.trainable {
            Trainable::Decoder => LatentStats::Keep,
            _ => LatentStats::Measure(section.stats_clips),
        };
        let exported = export(&engine.trainer.ema_model(), stats, Stored::F32, &dir)?;
        eprintln!("latents_mean {:?}\nlatents_std {:?}", exported.latents_mean, exported.latents_std);
        println!("{}", dir.display());
        Ok(code)
    }
}

/// The codec's trainer as a run the training loop drives.
struct Codec<'a, B: AttentionBackend> {
    trainer: Trainer<Autodiff<B>, WanVae<Autodiff<B>>>,
    objective: &'a VaeObjective,
    /// The VAE config recorded in (and checked against) the checkpoints.
    described: serde_json::Value,
}

impl<B: AttentionBackend> Steps<WorldClips> for Codec<'_, B> {
    fn done(&self) -> usize {
        self.trainer.step_count()
    }
    fn step(&mut self, data: &WorldClips) -> Result<StepReport> {
        Ok(self.trainer.step(self.objective, data)?)
    }
    fn save(&self, run: &Path) -> Result<PathBuf> {
        Ok(save_module(run, &self.trainer, self.described.clone())?)
    }
}
