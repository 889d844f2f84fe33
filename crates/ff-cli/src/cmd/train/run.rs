//! The CLI's side of a training run (the run itself is `ff_train::runner`): the session from the
//! flags' config, its effective config printed, the backend the `devices` key picks, the Ctrl-C
//! flag and the progress bar around the runner's loop, and the exit code: 0 for a finished run
//! (its newest checkpoint printed on stdout), 130 when Ctrl-C stopped it after a checkpoint.

use super::flags::{RunFlags, in_flag_terms};
use super::progress::Observer;
use crate::backend::{BackendTask, DeviceSpec, Precision, dispatch};
use crate::progress::install_interrupt_flag;
use anyhow::Result;
use ff_model::{AttentionBackend, DitConfig};
use ff_train::TrainError;
use ff_train::runner::{self, AnyBackendObjective, OnBackend, Outcome, Progress, RunConfig, Session, Start};
use flashforward::model::files::dit_files;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;

/// Prepares the session of `config` (`ff_train::runner::Session::prepare`) on the devices its
/// `devices` key names, on the node and with the resume choice of `flags`, starting from `start`
/// or else from the model directory's DiT, and prints the effective config.
pub fn prepare<C: Serialize + DeserializeOwned>(
    config: RunConfig<C>,
    flags: &RunFlags,
    start: Option<Start>,
) -> Result<(Session<C>, DeviceSpec)> {
    let devices: DeviceSpec = config.paths.devices.parse()?;
    let start = match start {
        Some(start) => start,
        None => {
            let model_dir = config.paths.model_dir.as_ref().ok_or_else(|| in_flag_terms(TrainError::Unset { key: "model_dir" }))?;
            let (weights, dit_config) = dit_files(model_dir)?;
            Start::Base { weights, config: DitConfig::from_json(&dit_config)? }
        }
    };
    let session = Session::prepare(config, devices.count(), flags.nodes()?, flags.resume, start).map_err(in_flag_terms)?;
    print_effective_config(&session.effective);
    Ok((session, devices))
}

pub fn print_effective_config(toml: &str) {
    eprintln!("effective config:\n{toml}");
}

/// Trains `session` with `objective` on `devices` (f32: optimizer state, EMA and checkpoints
/// are f32 too).
pub fn train<C, O: AnyBackendObjective>(session: &Session<C>, objective: &O, devices: &DeviceSpec) -> Result<Outcome> {
    dispatch(devices, Precision::F32, Train { session, objective })
}

struct Train<'a, C, O> {
    session: &'a Session<C>,
    objective: &'a O,
}

impl<C, O: AnyBackendObjective> BackendTask for Train<'_, C, O> {
    type Output = Outcome;

    fn run<B: AttentionBackend>(self, devices: Vec<B::Device>) -> Result<Outcome> {
        observed(|stop, progress| runner::train::<B, C, _>(self.session, &OnBackend(self.objective), devices, stop, progress))
    }
}

/// Runs `run` (a loop of the runner) with the Ctrl-C flag as its stop flag and the progress bar
/// drawing its events.
pub fn observed(run: impl FnOnce(&AtomicBool, &mut dyn FnMut(Progress)) -> ff_train::Result<Outcome>) -> Result<Outcome> {
    let stop = install_interrupt_flag()?;
    let mut observer = Observer::default();
    let outcome = run(&stop, &mut |event| observer.on(event));
    if outcome.is_err() {
        observer.failed();
    }
    Ok(outcome?)
}

/// The exit code of `outcome`; a finished run's newest checkpoint is printed on stdout.
pub fn finish(outcome: &Outcome) -> ExitCode {
    match outcome {
        Outcome::Finished { checkpoint } => {
            if let Some(dir) = checkpoint {
                println!("{}", dir.display());
            }
            ExitCode::SUCCESS
        }
        Outcome::Stopped { .. } => ExitCode::from(130),
    }
}
