//! `flashforward plan`: forward counts and rounds of a schedule's generation graph.

use ff_sched::bank::{KvDims, bank_plan};
use ff_sched::exec::Placement;
use ff_sched::trace::write_atomic;
use ff_sched::{Contract, ContractConfig, Graph, ScheduleKind};
use std::path::PathBuf;
use std::process::ExitCode;

/// The state-contract knobs shared by `plan`, `simulate`, `bench` and `generate` (all but the
/// length, which each command takes its own way).
#[derive(clap::Args, Debug, Clone)]
pub struct ContractKnobs {
    /// Denoising stages S [default: 4; generate: the student's].
    #[arg(long)]
    pub stages: Option<usize>,
    /// Anchor stride Δ in latents [default: 10; generate: the student's].
    #[arg(long)]
    pub anchor_stride: Option<usize>,
    /// Anchors per renderer window Γ (windows share an endpoint) [default: 3].
    #[arg(long)]
    pub anchor_window: Option<usize>,
    /// Stage-matched history H in chunks [default: 5; generate: the student's].
    #[arg(long)]
    pub history: Option<usize>,
    /// Renderer chunk size B_R in latents [default: 3; generate: the student's].
    #[arg(long)]
    pub chunk: Option<usize>,
    /// Disable the clean anchor bank (and the planner): ablation.
    #[arg(long)]
    pub no_anchors: bool,
    /// Disable the stage-matched history (same as --history 0): ablation.
    #[arg(long, conflicts_with = "history")]
    pub no_history: bool,
    /// Planner sampler: N Euler steps of its flow ODE instead of the S distilled stages (0: the
    /// stages) [default: 0; generate: the student's].
    #[arg(long)]
    pub planner_steps: Option<usize>,
    /// Classifier-free guidance of the planner's Euler steps against the empty prompt (1:
    /// unguided) [default: 1; generate: the student's].
    #[arg(long)]
    pub planner_guidance: Option<f64>,
}

impl ContractKnobs {
    /// The contract of a video of `latents` latent frames (the paper's defaults where no flag
    /// is given).
    pub fn contract(&self, latents: usize) -> anyhow::Result<Contract> {
        self.contract_over(ContractConfig::new(latents))
    }

    /// The contract of `base` with the knobs given as flags applied over it.
    pub fn contract_over(&self, base: ContractConfig) -> anyhow::Result<Contract> {
        let history = if self.no_history { Some(0) } else { self.history };
        let config = ContractConfig {
            stages: self.stages.unwrap_or(base.stages),
            anchor_stride: self.anchor_stride.unwrap_or(base.anchor_stride),
            anchor_window: self.anchor_window.unwrap_or(base.anchor_window),
            history: history.unwrap_or(base.history),
            chunk: self.chunk.unwrap_or(base.chunk),
            use_anchors: base.use_anchors && !self.no_anchors,
            planner_steps: self.planner_steps.unwrap_or(base.planner_steps),
            planner_guidance: self.planner_guidance.unwrap_or(base.planner_guidance),
            ..base
        };
        Contract::new(config).map_err(|e| {
            anyhow::anyhow!("{e} (flags: --latents or --seconds, --stages, --anchor-stride, --anchor-window, --history, --chunk, --planner-steps, --planner-guidance)")
        })
    }
}

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
        self.knobs.contract(self.latents)
    }
}

/// A schedule and its contract: the graph `plan` and `simulate` work on.
#[derive(clap::Args, Debug)]
pub struct GraphArgs {
    /// flashforward, self-forcing, hiar, n-c-causal-rcm or bidirectional.
    #[arg(long, value_parser = parse_schedule)]
    pub schedule: ScheduleKind,
    #[command(flatten)]
    pub contract: ContractArgs,
}

impl GraphArgs {
    pub fn graph(&self) -> anyhow::Result<Graph> {
        Ok(self.schedule.build(&self.contract.contract()?)?)
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
        write_atomic(path, &serde_json::to_vec_pretty(&graph)?)?;
        report["graph_json"] = path.display().to_string().into();
    }
    if let Some(path) = &args.dot {
        write_atomic(path, graph.to_dot().as_bytes())?;
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
