//! The training runner: what turns a phase's trainer into a run on disk (burn-train's learner,
//! for this crate's engine).
//!
//! * [`RunConfig`] ([`config`]): the run's TOML config, paths and devices at the top level,
//!   `[train]` the engine's keys, and the objective's section; a key the file does not give keeps
//!   its default.
//! * [`Session`] ([`session`]): the checks and preparation before a backend starts (run
//!   directory, resume point, dataset, the effective config saved as `RUN/config.toml`), and
//!   [`train`], a Phase 1 style run of one [`Objective`](crate::Objective) from start to end.
//! * [`drive`]: the loop every phase shares. It steps a [`Steps`] ([`steps`]) up to the run's
//!   total, appends each step to the metrics log ([`metrics`]: `metrics.jsonl`, `loss.svg`),
//!   checkpoints every `checkpoint_every` steps, at the end and when the stop flag is set
//!   (after the current step), and resumes from a checkpoint first when asked.
//! * [`export`]: what a finished run leaves for `generate` (`RUN/transformer/`).
//!
//! Nothing here prints: progress goes to a callback ([`Progress`]) and to `tracing` events
//! (target `ff_train::runner`), errors are [`TrainError`](crate::TrainError)s.
//!
//! ```no_run
//! # use ff_train::runner::{Plan, Progress, Outcome, Steps, drive};
//! # fn run(state: &mut dyn Steps, data: &ff_train::data::ShardDataset) -> ff_train::Result<()> {
//! let stop = std::sync::atomic::AtomicBool::new(false); // set it (e.g. on Ctrl-C) to stop
//! let plan = Plan { run: "runs/sft".as_ref(), steps: 100, checkpoint_every: 25, resume: None, writes: true };
//! let outcome = drive(&plan, data, state, &stop, &mut |event| {
//!     if let Progress::Step { report, .. } = event {
//!         eprintln!("step {}: loss {:.4}", report.step, report.loss);
//!     }
//! })?;
//! assert!(matches!(outcome, Outcome::Finished { .. } | Outcome::Stopped { .. }));
//! # Ok(()) }
//! ```

pub mod config;
pub mod export;
pub mod metrics;
pub mod session;
pub mod steps;
#[cfg(test)]
mod tests;

pub use config::{CONFIG_FILE, Paths, RunConfig};
pub use metrics::Metrics;
pub use session::{Session, Start, resume_checkpoint, save_effective_config, train};
#[cfg(feature = "world")]
pub use steps::Codec;
pub use steps::{AnyBackendObjective, DmdSteps, Engine, OnBackend, Steps};

use crate::Result;
use crate::checkpoint::latest;
use crate::engine::StepReport;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// Where and how far [`drive`] runs.
#[derive(Clone, Copy, Debug)]
pub struct Plan<'a> {
    /// The run directory: checkpoints, metrics, loss curve.
    pub run: &'a Path,
    /// Optimizer steps of the whole run (a resumed run counts the checkpoint's).
    pub steps: usize,
    /// A checkpoint every this many steps (and at the end, and on stop).
    pub checkpoint_every: usize,
    /// The checkpoint to restore before the first step ([`resume_checkpoint`]).
    pub resume: Option<&'a Path>,
    /// Whether this process writes the run's files (metrics, checkpoints): node 0 of a
    /// multi-node run, the only process otherwise. The other nodes train in step and only log.
    pub writes: bool,
}

/// What [`drive`] reports as it goes, in this order: `Resumed` (when resuming), `Started`, then
/// per step `Step` and, on the checkpoint cadence, `Checkpoint`; last `Stopped` or `Finished`.
#[derive(Clone, Debug, PartialEq)]
pub enum Progress {
    /// The state was restored from a checkpoint.
    Resumed {
        /// The checkpoint folder.
        dir: PathBuf,
        /// Steps done after restoring it.
        step: usize,
    },
    /// The loop starts.
    Started {
        /// Steps already done (a resumed run's).
        done: usize,
        /// Steps of the whole run.
        total: usize,
    },
    /// A step finished.
    Step {
        /// Its loss, learning rate, gradient norm, loss parts and step number.
        report: StepReport,
        /// Steps of the whole run.
        total: usize,
        /// Wall time of the step.
        seconds: f64,
    },
    /// A checkpoint was written.
    Checkpoint {
        /// The step it holds.
        step: usize,
        /// That step's loss.
        loss: f64,
        /// The checkpoint folder.
        dir: PathBuf,
    },
    /// The stop flag ended the run (after a checkpoint: resuming continues it).
    Stopped {
        /// The last step done.
        step: usize,
    },
    /// Every step is done.
    Finished {
        /// The run's newest checkpoint.
        checkpoint: Option<PathBuf>,
    },
}

/// How a [`drive`] ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Every step is done.
    Finished {
        /// The run's newest checkpoint (what an export reads).
        checkpoint: Option<PathBuf>,
    },
    /// The stop flag ended the run, with a checkpoint of its last step.
    Stopped {
        /// The last step done.
        step: usize,
    },
}

/// The loop: restores `plan.resume` when given, then steps `state` over `data` up to
/// `plan.steps` in total, logging each step to the run's metrics and checkpointing every
/// `plan.checkpoint_every` steps, after the last one, and after the step during which `stop`
/// was set (then it returns [`Outcome::Stopped`]); a process that does not write
/// ([`Plan::writes`]) skips the metrics and checkpoints and finishes without a checkpoint. Each
/// event goes to `progress` and to a `tracing` event. A failed step or write ends the run with
/// its error (the newest checkpoint stays the place to resume from); a run that ends otherwise
/// closes the state ([`Steps::close`]).
pub fn drive<D: ?Sized>(
    plan: &Plan,
    data: &D,
    state: &mut dyn Steps<D>,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(Progress),
) -> Result<Outcome> {
    let run = plan.run;
    if let Some(dir) = plan.resume {
        state.restore(dir)?;
        tracing::info!(checkpoint = %dir.display(), step = state.done(), "resumed");
        progress(Progress::Resumed { dir: dir.to_path_buf(), step: state.done() });
    }
    let mut metrics = plan.writes.then(|| Metrics::open(run, state.done())).transpose()?;
    tracing::info!(run = %run.display(), done = state.done(), total = plan.steps, "training");
    progress(Progress::Started { done: state.done(), total: plan.steps });
    while state.done() < plan.steps {
        let start = Instant::now();
        let report = state.step(data)?;
        let seconds = start.elapsed().as_secs_f64();
        if let Some(metrics) = metrics.as_mut() {
            metrics.log(&report, seconds)?;
        }
        tracing::info!(step = report.step, loss = report.loss, lr = report.lr, grad_norm = report.grad_norm, seconds, "step");
        let step = report.step;
        let loss = report.loss;
        progress(Progress::Step { report, total: plan.steps, seconds });
        let stopped = stop.load(Ordering::SeqCst);
        let cadence = step.is_multiple_of(plan.checkpoint_every) || step == plan.steps || stopped;
        if let Some(metrics) = metrics.as_mut().filter(|_| cadence) {
            let dir = state.save(run)?;
            metrics.checkpoint()?;
            tracing::info!(step, checkpoint = %dir.display(), "checkpoint");
            progress(Progress::Checkpoint { step, loss, dir });
        }
        if stopped {
            state.close();
            tracing::info!(step, "stopped");
            progress(Progress::Stopped { step });
            return Ok(Outcome::Stopped { step });
        }
    }
    state.close();
    let checkpoint = if plan.writes { latest(run)? } else { None };
    tracing::info!(checkpoint = ?checkpoint, "finished");
    progress(Progress::Finished { checkpoint: checkpoint.clone() });
    Ok(Outcome::Finished { checkpoint })
}
