//! `flashforward plan`: forward counts and rounds of a schedule's generation graph.

use anyhow::Context;
use ff_sched::bank::{KvDims, bank_plan};
use ff_sched::exec::Placement;
use ff_sched::{Contract, Graph, ScheduleKind};
use flashforward::ContractKnobs;
use std::path::PathBuf;
use std::process::ExitCode;

/// The state-contract flags of the scheduling subcommands.
#[derive(clap::Args, Debug, Clone)]
pub struct ContractArgs {
    /// Latent frames L of the video.
    #[arg(long, default_value_t = 81)]
    pub latents: usize,
    #[command(flatten)]
    pub knobs: ContractKnobs,
}

impl ContractArgs {
    pub fn contract(&self) -> anyhow::Result<Contract> {
        Ok(self.knobs.contract(self.latents)?)
    }
}

/// A schedule and its contract, or a graph file: the graph `plan` and `simulate` work on.
#[derive(clap::Args, Debug)]
pub struct GraphArgs {
    /// flashforward, self-forcing, hiar, n-c-causal-rcm or bidirectional.
    #[arg(long, value_parser = parse_schedule, required_unless_present = "schedule_file")]
    pub schedule: Option<ScheduleKind>,
    /// A custom generation graph (JSON written by `plan --graph`, e.g. edited, or by
    /// `Graph::to_json` from a `GraphBuilder`), instead of --schedule and the contract flags.
    #[arg(long, value_name = "GRAPH.json", conflicts_with = "schedule")]
    pub schedule_file: Option<PathBuf>,
    #[command(flatten)]
    pub contract: ContractArgs,
}

impl GraphArgs {
    pub fn graph(&self) -> anyhow::Result<Graph> {
        match (&self.schedule_file, self.schedule) {
            (Some(path), _) => {
                let text = std::fs::read_to_string(path).with_context(|| format!("--schedule-file {}", path.display()))?;
                Graph::from_json(&text).with_context(|| format!("--schedule-file {}", path.display()))
            }
            (None, Some(schedule)) => Ok(schedule.build(&self.contract.contract()?)?),
            (None, None) => anyhow::bail!("give --schedule or --schedule-file"),
        }
    }
}

/// Parses a schedule name for clap.
pub fn parse_schedule(s: &str) -> Result<ScheduleKind, String> {
    s.parse().map_err(|e: ff_sched::SchedError| e.to_string())
}

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub graph: GraphArgs,
    /// Also report K/V bank bytes per device for this model preset (tiny, small, 1.3b, 14b).
    #[arg(long)]
    pub model: Option<String>,
    /// Latent height and width for the bank bytes (480p: 60 × 104).
    #[arg(long, default_value_t = 60)]
    pub height: usize,
    #[arg(long, default_value_t = 104)]
    pub width: usize,
    /// Bytes per K/V element (2: bf16, 4: f32).
    #[arg(long, default_value_t = 2)]
    pub dtype_bytes: usize,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
    /// Write the generation graph (contract, nodes, reads, publishes, dependencies) as JSON.
    #[arg(long = "graph", value_name = "FILE.json")]
    pub graph_json: Option<PathBuf>,
    /// Write the generation graph as Graphviz DOT (render with `dot -Tsvg`).
    #[arg(long, value_name = "FILE.dot")]
    pub dot: Option<PathBuf>,
}

/// Bank bytes per worker of the wavefront and streaming placements.
fn bank_report(args: &Args, graph: &Graph, preset: &str) -> anyhow::Result<serde_json::Value> {
    let dims = KvDims::from_dit(&super::bench::preset(preset)?, args.height, args.width, args.dtype_bytes);
    let per_worker = |p: Placement| -> Vec<usize> { bank_plan(graph, &p).iter().map(|w| w.bytes(&dims)).collect() };
    let stages = graph.contract.stages();
    Ok(serde_json::json!({
        "model": preset,
        "frame_bytes": dims.frame_bytes(),
        "wavefront": per_worker(Placement::wavefront(stages)),
        "streaming": per_worker(Placement::streaming(stages)),
    }))
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let graph = args.graph.graph()?;
    let c = &graph.contract;
    let counts = graph.counts();
    let mut report = serde_json::json!({
        "schedule": graph.schedule,
        "latents": c.config.latents,
        "stages": c.stages(),
        "chunks": c.num_chunks(),
        "planner_blocks": graph.nodes.iter().filter(|n| n.kind == ff_sched::schedule::NodeKind::PlannerCache).count(),
        "anchors": c.anchors,
        "timesteps": c.timesteps,
        "planner_timesteps": c.planner_timesteps,
        "forwards": counts.forwards,
        "cache_update_forwards": counts.cache_update_forwards,
        "planner_forwards": counts.planner_forwards,
        "renderer_forwards": counts.renderer_forwards,
        "rounds": ff_sched::sim::rounds(&graph),
    });
    if let Some(preset) = &args.model {
        report["bank_bytes_per_device"] = bank_report(&args, &graph, preset)?;
    }
    if let Some(path) = &args.graph_json {
        ff_model::io::write_atomic(path, |w| serde_json::to_writer_pretty(w, &graph).map_err(Into::into))?;
        report["graph_json"] = path.display().to_string().into();
    }
    if let Some(path) = &args.dot {
        ff_model::io::write_atomic(path, |w| std::io::Write::write_all(w, graph.to_dot().as_bytes()))?;
        report["dot"] = path.display().to_string().into();
    }
    print_report(&report, args.json);
    Ok(ExitCode::SUCCESS)
}

/// Prints a JSON object on one line (`--json`) or as aligned `key  value` lines.
pub fn print_report(report: &serde_json::Value, json: bool) {
    if json {
        println!("{report}");
        return;
    }
    let obj = report.as_object().expect("report is an object");
    let width = obj.keys().map(String::len).max().unwrap_or(0);
    for (key, value) in obj {
        println!("{key:>width$}  {value}");
    }
}
