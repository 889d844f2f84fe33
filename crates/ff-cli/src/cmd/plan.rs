//! `flashforward plan`: forward counts and rounds of a schedule's generation graph.

use super::{ContractArgs, parse_schedule};
use ff_sched::ScheduleKind;

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

pub fn run(args: Args) -> anyhow::Result<()> {
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
    Ok(())
}
