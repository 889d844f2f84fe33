//! `flashforward simulate`: discrete-event replay of a schedule's graph (see `ff_sched::sim`).

use crate::schedule::{GraphArgs, print_report};
use ff_sched::sim::{CostModel, simulate};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub graph: GraphArgs,
    /// Stage-worker devices (stage k runs on device k mod N).
    #[arg(long, default_value_t = 4)]
    pub devices: usize,
    /// Seconds of one block-sized forward.
    #[arg(long)]
    pub forward_seconds: f64,
    /// Dedicated planner devices (0: the planner runs on the stage devices first).
    #[arg(long, default_value_t = 0)]
    pub planner_devices: usize,
    /// Write a Chrome trace to this file (and an SVG wavefront chart beside it), creating its
    /// folder.
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let graph = args.graph.graph()?;
    let cost = CostModel { forward_seconds: args.forward_seconds, planner_devices: args.planner_devices };
    let sim = simulate(&graph, args.devices, cost)?;
    if let Some(path) = &args.trace {
        let executor = format!("simulated ({} stage + {} planner devices)", args.devices, args.planner_devices);
        sim.trace.write(&graph, &executor, path)?;
    }
    let round = |x: f64| (x * 1e9).round() / 1e9;
    let report = serde_json::json!({
        "schedule": graph.schedule,
        "latents": graph.contract.config.latents,
        "stages": graph.contract.stages(),
        "devices": args.devices,
        "planner_devices": args.planner_devices,
        "forward_seconds": args.forward_seconds,
        "forwards": graph.counts().forwards,
        "seconds": round(sim.seconds),
        "rounds": round(sim.rounds),
        "ttff_seconds": round(sim.ttff_seconds),
        "slowest_worker_busy_seconds": round(sim.slowest_worker_busy_seconds),
    });
    print_report(&report, args.json);
    Ok(ExitCode::SUCCESS)
}
