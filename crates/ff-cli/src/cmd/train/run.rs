//! A training session: checks and prepares everything cheap first (paths, run directory, model
//! config, dataset), prints and saves the effective config, then trains on the selected backend:
//! the base DiT from the model directory with fresh roles (or the run's newest checkpoint), one
//! optimizer step after another with the progress bar and the metrics log, a checkpoint every
//! `checkpoint_every` steps, at the end, and when Ctrl-C stops the run after the current step.

use super::config::RunConfig;
use super::metrics::Metrics;
use super::progress::StepProgress;
use crate::backend::{BackendTask, DeviceSpec, Precision, dispatch};
use crate::cmd::generate::paths::dit_files;
use crate::progress::install_interrupt_flag;
use crate::video::write_atomic;
use anyhow::{Context, Result, bail};
use burn::backend::Autodiff;
use burn::module::AutodiffModule;
use burn::tensor::backend::{AutodiffBackend, Backend};
use ff_model::{AttentionBackend, DitConfig, WanDit};
use ff_train::checkpoint::{self, latest, restore};
use ff_train::data::{ClipSource, LatentClip, ShardDataset};
use ff_train::engine::Trainer;
use ff_train::{Loss, Objective, TrainRng};
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
    config: RunConfig<C>,
    run: PathBuf,
    devices: DeviceSpec,
    dit: PathBuf,
    dit_config: DitConfig,
    data: ShardDataset,
    resume: Option<PathBuf>,
}

impl<C: Serialize + DeserializeOwned> Session<C> {
    /// Checks the config and the run directory, resolves the model files, opens the dataset,
    /// prints the effective config and saves it as `RUN/config.toml`.
    pub fn prepare(config: RunConfig<C>, run: PathBuf, resume: bool) -> Result<Self> {
        let devices: DeviceSpec = config.paths.devices.parse()?;
        let Some(model_dir) = &config.paths.model_dir else { bail!("no model: pass --model-dir DIR or set `model_dir` in the config") };
        let Some(data) = &config.paths.data else { bail!("no data: pass --data DATA or set `data` in the config") };
        config.train.validate()?;
        config.train.accumulation(devices.count())?;
        let resume = resume_checkpoint(&run, resume)?;
        let (dit, dit_config_path) = dit_files(model_dir)?;
        let dit_config = DitConfig::from_json(&dit_config_path)?;
        let data = ShardDataset::open(data)?;
        save_effective_config(&config, &run)?;
        Ok(Self { config, run, devices, dit, dit_config, data, resume })
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
    write_atomic(&run.join(CONFIG_FILE), |w| Ok(w.write_all(effective.as_bytes())?))
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
}

/// An [`AnyBackendObjective`] as the engine's [`Objective`] on one backend.
struct OnBackend<'a, O>(&'a O);

impl<B: AttentionBackend, O: AnyBackendObjective> Objective<Autodiff<B>> for OnBackend<'_, O> {
    fn loss(&self, model: &WanDit<Autodiff<B>>, clip: &LatentClip, rng: &mut TrainRng) -> ff_train::Result<Loss<Autodiff<B>>> {
        self.0.loss::<B>(model, clip, rng)
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
        let model = WanDit::<Autodiff<B>>::load(&s.dit_config, &s.dit, &devices[0])
            .with_context(|| format!("cannot load the DiT from {}", s.dit.display()))?
            .with_roles(&c.lora());
        let mut trainer = Trainer::new(c.clone(), model, devices, s.data.len())?;
        if let Some(dir) = &s.resume {
            restore(&mut trainer, dir)?;
            eprintln!("resumed from {} after step {}", dir.display(), trainer.step_count());
        }
        let objective = OnBackend(&objective);
        let code = run_steps(&mut trainer, &objective, &s.data, &s.run, |t| Ok(checkpoint::save(&s.run, t, Some(&s.dit))?))?;
        if code == ExitCode::SUCCESS
            && let Some(dir) = latest(&s.run)?
        {
            println!("{}", dir.display());
        }
        Ok(code)
    }
}

/// Runs `trainer` up to its configured steps with the progress bar and the metrics log of `run`,
/// saving a checkpoint with `save` every `checkpoint_every` steps, at the end, and when Ctrl-C
/// stops the run after the current step (exit status 130).
pub fn run_steps<B, M, C, O>(
    trainer: &mut Trainer<B, M>,
    objective: &O,
    data: &dyn ClipSource<C>,
    run: &Path,
    save: impl Fn(&Trainer<B, M>) -> Result<PathBuf>,
) -> Result<ExitCode>
where
    B: AutodiffBackend + AttentionBackend,
    B::InnerBackend: AttentionBackend,
    M: AutodiffModule<B> + Send,
    C: Send,
    O: Objective<B, M, C> + Sync,
{
    let steps = trainer.config().steps;
    let every = trainer.config().checkpoint_every;
    let mut metrics = Metrics::open(run, trainer.step_count())?;
    let progress = StepProgress::new(trainer.step_count(), steps);
    let interrupt = install_interrupt_flag()?;
    while trainer.step_count() < steps {
        let start = Instant::now();
        let report = trainer.step(objective, data).inspect_err(|_| progress.abandon("failed"))?;
        metrics.log(&report, start.elapsed().as_secs_f64())?;
        progress.step(report.step, report.loss);
        let stop = interrupt.load(Ordering::SeqCst);
        if report.step % every == 0 || report.step == steps || stop {
            let dir = save(trainer)?;
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
    Ok(ExitCode::SUCCESS)
}
