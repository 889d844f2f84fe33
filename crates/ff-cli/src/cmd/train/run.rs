//! A training session: checks and prepares everything cheap first (paths, run directory, model
//! config, dataset), prints and saves the effective config, then trains on the selected backend:
//! the base DiT from the model directory with fresh roles (or the run's newest checkpoint), one
//! optimizer step after another with the progress bar and the metrics log, a checkpoint every
//! `checkpoint_every` steps, at the end, and when Ctrl-C stops the run after the current step.

use super::config::RunConfig;
use super::metrics::Metrics;
use super::progress::StepProgress;
use crate::backend::{BackendTask, DeviceSpec, Precision, dispatch};
use crate::progress::install_interrupt_flag;
use anyhow::{Context, Result, bail};
use burn::backend::Autodiff;
use burn::tensor::backend::Backend;
use ff_model::io::write_atomic;
use ff_model::{AttentionBackend, DitConfig, WanDit};
use ff_train::checkpoint::{self, latest, restore};
use ff_train::data::{ClipSource, LatentClip, ShardDataset};
use ff_train::engine::{StepReport, Trainer};
use ff_train::{Loss, Objective, TrainRng};
use flashforward::model::files::dit_files;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::Instant;

/// The effective config of a run, saved in the run directory.
pub const CONFIG_FILE: &str = "config.toml";

/// Everything a training run needs before the backend starts.
pub struct Session<C> {
    pub(super) config: RunConfig<C>,
    pub(super) run: PathBuf,
    pub(super) devices: DeviceSpec,
    /// The model directory's DiT weights (the run adds fresh roles), or `None`: random weights
    /// of `dit_config`, no roles (every parameter is in the checkpoints). And the config.
    pub(super) dit: Option<PathBuf>,
    pub(super) dit_config: DitConfig,
    /// With `dit` = `None`: weights the run starts from instead of random ones, and their
    /// config: `dit_config`'s, or a shallower one grown into it (`ff_train::teacher::grow`); no
    /// roles, every parameter is in the checkpoints.
    pub(super) init: Option<(PathBuf, DitConfig)>,
    pub(super) data: ShardDataset,
    /// The checkpoint to resume from.
    pub(super) resume: Option<PathBuf>,
}

impl<C: Serialize + DeserializeOwned> Session<C> {
    /// Checks the config and the run directory, resolves the model files, opens the dataset,
    /// prints the effective config and saves it as `RUN/config.toml`. The DiT is the model
    /// directory's, or a fresh one of `fresh` when given.
    pub fn prepare(config: RunConfig<C>, run: PathBuf, resume: bool, fresh: Option<DitConfig>) -> Result<Self> {
        let devices: DeviceSpec = config.paths.devices.parse()?;
        let Some(model_dir) = &config.paths.model_dir else { bail!("no model: pass --model-dir DIR or set `model_dir` in the config") };
        let Some(data) = &config.paths.data else { bail!("no data: pass --data DATA or set `data` in the config") };
        config.train.validate()?;
        config.train.accumulation(devices.count())?;
        let resume = resume_checkpoint(&run, resume)?;
        let (dit, dit_config) = match fresh {
            Some(config) => (None, config),
            None => {
                let (dit, dit_config_path) = dit_files(model_dir)?;
                (Some(dit), DitConfig::from_json(&dit_config_path)?)
            }
        };
        let data = ShardDataset::open(data)?;
        save_effective_config(&config, &run)?;
        Ok(Self { config, run, devices, dit, dit_config, init: None, data, resume })
    }
}

/// The checkpoint a run continues from: the newest of `run` with `--resume` (an error when there
/// is none), none for a new run (an error when `run` already holds one).
pub fn resume_checkpoint(run: &Path, resume: bool) -> Result<Option<PathBuf>> {
    match (resume, latest(run)?) {
        (true, Some(dir)) => Ok(Some(dir)),
        (true, None) => bail!("--resume: {} holds no checkpoint", run.display()),
        (false, Some(dir)) => {
            bail!(
                "{} already holds a run (checkpoint {}): pass --resume to continue it, or choose another --out",
                run.display(),
                dir.display()
            )
        }
        (false, None) => Ok(None),
    }
}

/// Prints the effective config and saves it as `RUN/config.toml` (creating `run`).
pub fn save_effective_config<C: Serialize + DeserializeOwned>(config: &RunConfig<C>, run: &Path) -> Result<()> {
    let effective = config.to_toml()?;
    eprintln!("effective config:\n{effective}");
    std::fs::create_dir_all(run).with_context(|| format!("cannot create the run directory {}", run.display()))?;
    Ok(write_atomic(&run.join(CONFIG_FILE), |w| w.write_all(effective.as_bytes()))?)
}

/// Runs the session's training with `objective` on its devices (f32: optimizer state, EMA and
/// checkpoints are f32 too).
pub fn train<C, O: AnyBackendObjective>(session: Session<C>, objective: O) -> Result<ExitCode> {
    let devices = session.devices.clone();
    dispatch(&devices, Precision::F32, Train { session, objective })
}

/// An objective on every backend the binary runs: the engine trains `Autodiff<B>`.
pub trait AnyBackendObjective: Sync {
    fn loss<B: AttentionBackend>(
        &self,
        model: &WanDit<Autodiff<B>>,
        clip: &LatentClip,
        rng: &mut TrainRng,
    ) -> ff_train::Result<Loss<Autodiff<B>>>;

    fn losses<B: AttentionBackend>(
        &self,
        model: &WanDit<Autodiff<B>>,
        clips: &[&LatentClip],
        rngs: &mut [TrainRng],
    ) -> ff_train::Result<Vec<Loss<Autodiff<B>>>>;
}

/// [`AnyBackendObjective`] for objectives that are an [`Objective`] on every `Autodiff<B>` (Rust
/// cannot state "for every backend" as a bound, hence one impl per type).
macro_rules! any_backend_objective {
    ($($objective:ty),*) => {$(
        impl AnyBackendObjective for $objective {
            fn loss<B: AttentionBackend>(
                &self,
                model: &WanDit<Autodiff<B>>,
                clip: &LatentClip,
                rng: &mut TrainRng,
            ) -> ff_train::Result<Loss<Autodiff<B>>> {
                Objective::loss(self, model, clip, rng)
            }

            fn losses<B: AttentionBackend>(
                &self,
                model: &WanDit<Autodiff<B>>,
                clips: &[&LatentClip],
                rngs: &mut [TrainRng],
            ) -> ff_train::Result<Vec<Loss<Autodiff<B>>>> {
                Objective::losses(self, model, clips, rngs)
            }
        }
    )*};
}
any_backend_objective!(ff_train::sft::SftObjective, ff_train::teacher::TeacherObjective);

/// An [`AnyBackendObjective`] as the engine's [`Objective`] on one backend.
struct OnBackend<'a, O>(&'a O);

impl<B: AttentionBackend, O: AnyBackendObjective> Objective<Autodiff<B>> for OnBackend<'_, O> {
    fn loss(&self, model: &WanDit<Autodiff<B>>, clip: &LatentClip, rng: &mut TrainRng) -> ff_train::Result<Loss<Autodiff<B>>> {
        self.0.loss::<B>(model, clip, rng)
    }

    fn losses(
        &self,
        model: &WanDit<Autodiff<B>>,
        clips: &[&LatentClip],
        rngs: &mut [TrainRng],
    ) -> ff_train::Result<Vec<Loss<Autodiff<B>>>> {
        self.0.losses::<B>(model, clips, rngs)
    }
}

struct Train<C, O> {
    session: Session<C>,
    objective: O,
}

impl<C, O: AnyBackendObjective> BackendTask for Train<C, O> {
    type Output = ExitCode;

    fn run<B: AttentionBackend>(self, devices: Vec<B::Device>) -> Result<ExitCode> {
        let Train { session, objective } = self;
        let s = &session;
        let c = &s.config.train;
        Autodiff::<B>::seed(&devices[0], c.seed);
        let model = match &s.dit {
            Some(dit) => WanDit::<Autodiff<B>>::load(&s.dit_config, dit, &devices[0])
                .with_context(|| format!("cannot load the DiT from {}", dit.display()))?
                .with_roles(&c.lora()),
            None => match &s.init {
                Some((init, config)) => {
                    let what = || format!("cannot start from the DiT weights {}", init.display());
                    let model = WanDit::<Autodiff<B>>::load(config, init, &devices[0]).with_context(what)?;
                    ff_train::teacher::grow(model, &s.dit_config).with_context(what)?
                }
                None => s.dit_config.init::<Autodiff<B>>(&devices[0]),
            },
        };
        let mut trainer = Trainer::new(c.clone(), model, devices, s.data.len())?;
        if let Some(dir) = &s.resume {
            restore(&mut trainer, dir)?;
            eprintln!("resumed from {} after step {}", dir.display(), trainer.step_count());
        }
        drive(
            &s.run,
            c.steps,
            c.checkpoint_every,
            &s.data,
            &mut Engine { trainer, objective: OnBackend(&objective), base: s.dit.as_deref() },
        )
    }
}

/// A run the training loop drives: one optimizer step (of whatever kind) at a time over data
/// `D` (latent clips by default; the codec's procedural clips), and its checkpoints.
pub(super) trait Steps<D: ?Sized = ShardDataset> {
    /// Steps done.
    fn done(&self) -> usize;
    fn step(&mut self, data: &D) -> Result<StepReport>;
    /// Saves a checkpoint into `run`; returns its folder.
    fn save(&self, run: &Path) -> Result<PathBuf>;
}

/// The engine's trainer with one objective.
struct Engine<'a, B: AttentionBackend, O> {
    trainer: Trainer<Autodiff<B>>,
    objective: OnBackend<'a, O>,
    base: Option<&'a Path>,
}

impl<B: AttentionBackend, O: AnyBackendObjective> Steps for Engine<'_, B, O> {
    fn done(&self) -> usize {
        self.trainer.step_count()
    }
    fn step(&mut self, data: &ShardDataset) -> Result<StepReport> {
        Ok(self.trainer.step(&self.objective, data)?)
    }
    fn save(&self, run: &Path) -> Result<PathBuf> {
        Ok(checkpoint::save(run, &self.trainer, self.base)?)
    }
}

/// The loop: steps up to `steps` in total with the progress bar and the metrics log, a
/// checkpoint every `checkpoint_every` steps, at the end, and when Ctrl-C stops the run after
/// the current step (exit code 130).
pub(super) fn drive<D: ?Sized>(run: &Path, steps: usize, checkpoint_every: usize, data: &D, state: &mut dyn Steps<D>) -> Result<ExitCode> {
    let mut metrics = Metrics::open(run, state.done())?;
    let progress = StepProgress::new(state.done(), steps);
    let interrupt = install_interrupt_flag()?;
    while state.done() < steps {
        let start = Instant::now();
        let report = state.step(data).inspect_err(|_| progress.abandon("failed"))?;
        metrics.log(&report, start.elapsed().as_secs_f64())?;
        progress.step(report.step, report.loss);
        let stop = interrupt.load(Ordering::SeqCst);
        if report.step % checkpoint_every == 0 || report.step == steps || stop {
            let dir = state.save(run)?;
            metrics.checkpoint()?;
            progress.note(format!("step {}: loss {:.4}, checkpoint {}", report.step, report.loss, dir.display()));
        }
        if stop {
            progress.abandon("interrupted");
            eprintln!("interrupted after step {}: resume with --resume", report.step);
            return Ok(ExitCode::from(130));
        }
    }
    progress.finish();
    if let Some(dir) = latest(run)? {
        println!("{}", dir.display());
    }
    Ok(ExitCode::SUCCESS)
}
