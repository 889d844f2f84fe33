//! `flashforward verify-fixture DIR`: runs the Rust model on every `weights_*.safetensors` of a
//! fixture folder and compares with the reference outputs. Prints one line per weights file and
//! `max_rel_err=<value>` last; exits 1 when the error is above the tolerance.

use crate::backend::{CpuBackend, cpu_device};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// Fixture folder holding meta.json, inputs/expected and weights_*.safetensors.
    dir: PathBuf,
    /// Largest accepted relative L2 error.
    #[arg(long, default_value_t = 1e-4)]
    tolerance: f64,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let checks = ff_model::fixture::verify_fixture::<CpuBackend>(&args.dir, &cpu_device())?;
    let mut max = 0f64;
    for c in &checks {
        println!("{}: rel_err={:.3e}", c.weights, c.max_rel_err);
        max = max.max(c.max_rel_err);
    }
    println!("max_rel_err={max:e}");
    Ok(if max <= args.tolerance { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}
