//! `flashforward plan`: forward counts and rounds of a schedule's generation graph.

use ff_sched::{Contract, ContractConfig, Graph, ScheduleKind};
use std::process::ExitCode;

/// The state-contract flags shared by the scheduling subcommands.
#[derive(clap::Args, Debug, Clone)]
pub struct ContractArgs {
    /// Latent frames L of the video.
    #[arg(long, default_value_t = 81)]
    pub latents: usize,
    /// Denoising stages S.
    #[arg(long, default_value_t = 4)]
    pub stages: usize,
    /// Anchor stride Δ in latents.
    #[arg(long, default_value_t = 10)]
    pub anchor_stride: usize,
    /// Stage-matched history H in chunks (0 disables the stage bank).
    #[arg(long, default_value_t = 5)]
    pub history: usize,
    /// Renderer chunk size B_R in latents.
    #[arg(long, default_value_t = 3)]
    pub chunk: usize,
    /// Disable the clean anchor bank (and the planner): ablation.
    #[arg(long)]
    pub no_anchors: bool,
}

impl ContractArgs {
    pub fn contract(&self) -> anyhow::Result<Contract> {
        let config = ContractConfig::new(self.latents)
            .with_stages(self.stages)
            .with_anchor_stride(self.anchor_stride)
            .with_history(self.history)
            .with_chunk(self.chunk)
            .with_use_anchors(!self.no_anchors);
        Ok(Contract::new(config)?)
    }

    pub fn graph(&self, schedule: ScheduleKind) -> anyhow::Result<Graph> {
        Ok(schedule.build(&self.contract()?)?)
    }
}

/// Parses a schedule name for clap.
pub fn parse_schedule(s: &str) -> Result<ScheduleKind, String> {
    s.parse().map_err(|e: ff_sched::SchedError| e.to_string())
}

#[derive(clap::Args, Debug)]
pub struct Args {
    /// flashforward, self-forcing, hiar, n-c-causal-rcm or bidirectional.
    #[arg(long, value_parser = parse_schedule)]
    pub schedule: ScheduleKind,
    #[command(flatten)]
    pub contract: ContractArgs,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let graph = args.contract.graph(args.schedule)?;
    let c = &graph.contract;
    let counts = graph.counts();
    let report = serde_json::json!({
        "schedule": graph.schedule.name(),
        "latents": c.config.latents,
        "stages": c.stages(),
        "chunks": c.num_chunks(),
        "planner_blocks": counts.planner_forwards / (c.stages() + 1),
        "anchors": c.anchors,
        "timesteps": c.timesteps,
        "forwards": counts.forwards,
        "cache_update_forwards": counts.cache_update_forwards,
        "planner_forwards": counts.planner_forwards,
        "renderer_forwards": counts.renderer_forwards,
        "rounds": ff_sched::sim::rounds(&graph),
    });
    if args.json {
        println!("{report}");
    } else {
        for (key, value) in report.as_object().expect("object") {
            println!("{key:>22}  {value}");
        }
    }
    Ok(ExitCode::SUCCESS)
}
