//! `flashforward verify-fixture DIR`: runs the Rust model on every `weights_*.safetensors` of a
//! fixture folder and compares with the reference outputs. Prints one line per weights file (per
//! weights file and attention path for the `self-forcing-causal` chunk fixtures) and
//! `max_rel_err=<value>` last; exits 1 when the error is above the tolerance.

use crate::backend::{BackendTask, DeviceSpec, Precision, dispatch};
use ff_model::AttentionBackend;
use ff_model::fixture::{FixtureCheck, verify_fixture};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// Fixture folder holding meta.json, inputs/expected and weights_*.safetensors.
    dir: PathBuf,
    /// Largest accepted relative L2 error (bf16 runs: 2e-2).
    #[arg(long, default_value_t = 1e-4)]
    tolerance: f64,
    /// Device to run on: cpu, cuda:N, wgpu:N.
    #[arg(long, default_value = "cpu")]
    devices: DeviceSpec,
    #[arg(long, value_enum, default_value = "f32")]
    precision: Precision,
}

struct Verify<'a>(&'a PathBuf);

impl BackendTask for Verify<'_> {
    type Output = Vec<FixtureCheck>;
    fn run<B: AttentionBackend>(self, devices: Vec<B::Device>) -> anyhow::Result<Vec<FixtureCheck>> {
        Ok(verify_fixture::<B>(self.0, &devices[0])?)
    }
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let checks = dispatch(&args.devices, args.precision, Verify(&args.dir))?;
    let mut max = 0f64;
    for c in &checks {
        println!("{}: rel_err={:.3e}", c.weights, c.max_rel_err);
        max = max.max(c.max_rel_err);
    }
    println!("max_rel_err={max:e}");
    Ok(if max <= args.tolerance { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}
