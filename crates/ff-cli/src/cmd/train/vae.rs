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

use super::flags::{RunFlags, apply, in_flag_terms};
use super::run::{finish, observed, print_effective_config};
use crate::backend::{BackendTask, DeviceSpec, Precision, dispatch};
use anyhow::{Context, Result, bail};
use burn::backend::Autodiff;
use burn::tensor::backend::Backend;
use ff_model::AttentionBackend;
use ff_train::checkpoint::Stored;
use ff_train::data::ClipSource;
use ff_train::engine::{Trainable, Trainer};
use ff_train::runner::{Codec, Outcome, Plan, RunConfig, drive, resume_checkpoint, save_effective_config};
use ff_train::vae::export::{EXPORT_DIR, LatentStats, export};
use ff_train::vae::{VaeObjective, VaeSection, WorldClips, start_codec, starting_codec, train_defaults};
use std::path::PathBuf;
use std::process::ExitCode;

/// The config section of the codec.
const SECTION: &str = "vae";

#[derive(clap::Args)]
pub struct Args {
    /// An exported codec (`config.json` + `diffusion_pytorch_model.safetensors`, e.g. an earlier
    /// run's `RUN/vae/`) whose weights start this run; its architecture must be `[vae.model]`'s.
    #[arg(long)]
    model_dir: Option<PathBuf>,
    #[command(flatten)]
    run: RunFlags,
}

pub fn run(args: Args) -> Result<ExitCode> {
    let mut config = RunConfig::defaults(SECTION, VaeSection::default());
    config.train = train_defaults();
    let config = apply(config, &args.run, &args.model_dir, &None)?;
    if config.paths.data.is_some() {
        bail!("train vae renders its clips: `data` is not used");
    }
    if args.run.nodes > 1 {
        bail!("train vae runs on one node: --nodes is for sft, dmd and teacher");
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
    let out = config.paths.out.clone().ok_or_else(|| in_flag_terms(ff_train::TrainError::Unset { key: "out" }))?;
    let devices: DeviceSpec = config.paths.devices.parse()?;
    config.train.validate()?;
    config.train.accumulation(devices.count())?;
    config.objective.model.validate().context("[vae.model]")?;
    let objective = VaeObjective::new(config.objective.loss.clone()).context("[vae.loss]")?;
    let clips = WorldClips::new(config.objective.clips.clone()).context("[vae.clips]")?;
    let resume = resume_checkpoint(&out, args.run.resume).map_err(in_flag_terms)?;
    print_effective_config(&save_effective_config(&config, &out)?);
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
        let model = start_codec::<Autodiff<B>>(section, config.paths.model_dir.as_deref(), config.train.trainable, &devices[0])?;
        // The codec's own config: with --model-dir it carries the starting codec's latent
        // statistics, which a decoder-only run exports unchanged.
        let described = serde_json::to_value(model.config())?;
        let trainer = Trainer::for_module(config.train.clone(), model, devices, clips.len())?;
        let c = &config.train;
        let plan = Plan { run: &out, steps: c.steps, checkpoint_every: c.checkpoint_every, resume: resume.as_deref(), writes: true };
        let mut engine = Codec { trainer, objective: &objective, described };
        let outcome = observed(|stop, progress| drive(&plan, &clips, &mut engine, stop, progress))?;
        let code = finish(&outcome);
        if let Outcome::Stopped { .. } = outcome {
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
