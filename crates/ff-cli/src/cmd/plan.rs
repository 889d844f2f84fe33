//! `flashforward plan`: forward counts and rounds of a schedule's generation graph.

use crate::schedule::{GraphArgs, preset, print_report};
use ff_sched::Graph;
use ff_sched::bank::{KvDims, bank_plan};
use ff_sched::exec::Placement;
use std::path::PathBuf;
use std::process::ExitCode;

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

/// Bank bytes per worker of the wavefront, streaming and context-parallel (FlashForward-CP)
/// placements.
fn bank_report(args: &Args, graph: &Graph, name: &str) -> anyhow::Result<serde_json::Value> {
    let dims = KvDims::from_dit(&preset(name)?, args.height, args.width, args.dtype_bytes);
    let per_worker = |p: Placement| -> Vec<usize> { bank_plan(graph, &p).iter().map(|w| w.bytes(&dims)).collect() };
    let stages = graph.contract.stages();
    Ok(serde_json::json!({
        "model": name,
        "frame_bytes": dims.frame_bytes(),
        "wavefront": per_worker(Placement::wavefront(stages)),
        "streaming": per_worker(Placement::streaming(stages)),
        "context_parallel": per_worker(Placement::context_parallel(stages)),
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
