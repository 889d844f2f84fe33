//! `flashforward train combine`: a student whose planner is another run's, sampled by guided
//! Euler steps. Phase 2 distils the planner to the renderer's `S` stages and, in the small world,
//! loses the long-horizon motion its Phase 1 planner has (docs/RESULTS.md, "The Phase 1 planner,
//! sampled by guided Euler steps"); this writes a student folder with:
//!
//! * `planner/`: the merged planner role of the newest checkpoint of `--planner` (a Phase 1 run),
//!   or an exported student's planner;
//! * `renderer/` and `config.json`: copied from the exported student `--student`;
//! * `flashforward.json`: the student's manifest with the planner sampler set
//!   (`planner_steps`, `planner_guidance` of its contract) and, with `--stages`, the renderer's
//!   re-noising stages at inference (a renderer distilled at four stages can be sampled at eight:
//!   docs/RESULTS.md, "More renderer stages for the renderer trained on uniform score
//!   timesteps"), written last.

use crate::backend::{CpuBackend, cpu_device};
use anyhow::{Context, Result, bail};
use ff_model::DitConfig;
use ff_model::io::write_atomic;
use ff_sched::student::{MANIFEST_FILE, StudentManifest};
use ff_sched::student::{ROLE_FOLDERS, ROLE_WEIGHTS};
use ff_train::runner::export::write_planner;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The planner the student takes: a run or checkpoint (its planner role, e.g. Phase 1's), or
    /// an exported student (its planner).
    #[arg(long)]
    planner: PathBuf,
    /// The exported student whose renderer, DiT config and manifest are kept (`RUN/transformer/`).
    #[arg(long)]
    student: PathBuf,
    /// Euler steps of the planner's sampler.
    #[arg(long)]
    planner_steps: usize,
    /// Classifier-free guidance of each planner step against the empty prompt (1: unguided).
    #[arg(long, default_value_t = 5.0)]
    planner_guidance: f64,
    /// The renderer's re-noising stages `S` at inference, on the contract's shifted grid (default:
    /// the student's, the stages its Phase 2 distilled).
    #[arg(long)]
    stages: Option<usize>,
    /// The student folder to write (created; its files are replaced).
    #[arg(long)]
    out: PathBuf,
}

pub fn run(args: Args) -> Result<ExitCode> {
    if args.planner_steps == 0 {
        bail!("--planner-steps must be at least 1: the combined planner is sampled by Euler steps");
    }
    let student = &args.student;
    let Some(mut manifest) = StudentManifest::read(student)? else {
        bail!("{}: not an exported student (no flashforward.json)", student.display());
    };
    let config_path = student.join("config.json");
    let dit = DitConfig::from_json(&config_path).with_context(|| format!("cannot read the DiT config {}", config_path.display()))?;
    (manifest.contract.planner_steps, manifest.contract.planner_guidance) = (args.planner_steps, args.planner_guidance);
    manifest.contract.stages = args.stages.unwrap_or(manifest.contract.stages);
    ff_sched::Contract::new(manifest.contract_at(manifest.contract.latents)).context("the combined student's contract")?;

    // The manifest marks a complete student folder: an old one goes first, the new one last.
    let out = &args.out;
    let manifest_path = out.join(MANIFEST_FILE);
    if manifest_path.is_file() {
        std::fs::remove_file(&manifest_path).with_context(|| format!("cannot remove {}", manifest_path.display()))?;
    }
    write_planner::<CpuBackend>(&dit, &args.planner, out, &cpu_device())
        .with_context(|| format!("cannot write the planner of {}", args.planner.display()))?;
    let copy = |from: PathBuf, to: PathBuf| -> Result<()> {
        std::fs::create_dir_all(to.parent().expect("a file in a folder")).with_context(|| format!("cannot create {}", to.display()))?;
        let mut file = std::fs::File::open(&from).with_context(|| format!("cannot read {}", from.display()))?;
        Ok(write_atomic(&to, |w| std::io::copy(&mut file, w).map(drop))?)
    };
    let renderer = ROLE_FOLDERS[1].1;
    copy(student.join(renderer).join(ROLE_WEIGHTS), out.join(renderer).join(ROLE_WEIGHTS))?;
    copy(config_path, out.join("config.json"))?;
    manifest.write(out)?;
    println!("{}", out.display());
    Ok(ExitCode::SUCCESS)
}
