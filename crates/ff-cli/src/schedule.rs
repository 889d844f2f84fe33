//! Flags and output shared by the scheduling commands (`plan`, `simulate`, `bench schedules`)
//! and the benchmarks: the state contract and graph flags, the DiT presets by name, and the
//! aligned `key  value` report.

use anyhow::Context;
use ff_model::dit::DitConfig;
use ff_sched::{Contract, Graph, ScheduleKind};
use flashforward::ContractKnobs;
use std::path::PathBuf;

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

/// A DiT preset by name (for `--config`/`--configs`/`--model`).
pub fn preset(name: &str) -> anyhow::Result<DitConfig> {
    DitConfig::preset(name).ok_or_else(|| anyhow::anyhow!("unknown DiT preset '{name}' ({})", DitConfig::PRESETS.join(", ")))
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
