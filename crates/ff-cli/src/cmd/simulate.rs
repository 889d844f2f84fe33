//! `flashforward simulate`: discrete-event replay of a schedule's graph (see `ff_sched::sim`),
//! with the communication of the model preset and frame size given (`ff_sched::sim::comm`).

use crate::cmd::bench::param_counts;
use crate::schedule::{GraphArgs, preset, print_report};
use ff_sched::sim::{CommModel, CostModel, Link, Traffic, simulate};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub graph: GraphArgs,
    /// Stage-worker devices (stage k runs on device k mod N).
    #[arg(long, default_value_t = 4)]
    pub devices: usize,
    /// Seconds of one block-sized forward on one device.
    #[arg(long)]
    pub forward_seconds: f64,
    /// Dedicated planner devices (0: the planner runs on the stage devices first; K > 1 shards
    /// each planner forward over the K).
    #[arg(long, default_value_t = 0)]
    pub planner_devices: usize,
    /// FlashForward-CP: shard every planner forward over all stage devices (context parallelism)
    /// instead of running it on device 0.
    #[arg(long, conflicts_with = "planner_devices")]
    pub planner_cp: bool,
    /// DiT preset whose sizes set the bytes moved (1.3b, 14b, or any preset).
    #[arg(long, default_value = "1.3b")]
    pub model: String,
    /// RGB frame height and width in pixels (480p: 480 × 832; 720p: 720 × 1280).
    #[arg(long, default_value_t = 480)]
    pub height: usize,
    #[arg(long, default_value_t = 832)]
    pub width: usize,
    /// Device-to-device link bandwidth, Gb/s per direction (3600: NVLink 4 on an H100 SXM; across
    /// nodes, one NDR InfiniBand port per GPU: 400).
    #[arg(long, default_value_t = Link::NVLINK.gbps)]
    pub link_gbps: f64,
    /// Latency of one device-to-device message, µs (NVLink: 10; across nodes: 20).
    #[arg(long, default_value_t = Link::NVLINK.latency_us)]
    pub link_latency_us: f64,
    /// Host-to-device bandwidth for role-weight swaps, Gb/s (PCIe 5.0 ×16: 200).
    #[arg(long, default_value_t = Link::PCIE.gbps)]
    pub host_gbps: f64,
    /// Fixed cost of one context-parallel forward pass, ms (launch and join on every device).
    #[arg(long, default_value_t = 1.0)]
    pub cp_overhead_ms: f64,
    /// Communication costs nothing (the replay in units of the forward cost alone).
    #[arg(long)]
    pub free_comm: bool,
    /// Write a Chrome trace to this file (and an SVG wavefront chart beside it), creating its
    /// folder.
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
}

impl Args {
    fn comm(&self) -> anyhow::Result<Option<CommModel>> {
        if self.free_comm {
            return Ok(None);
        }
        let config = preset(&self.model)?;
        let traffic = Traffic::new(&config, self.height, self.width, param_counts(&config, 0).0);
        let mut comm = CommModel::h100(traffic);
        comm.link = Link { gbps: self.link_gbps, latency_us: self.link_latency_us };
        comm.host.gbps = self.host_gbps;
        comm.cp_overhead_seconds = self.cp_overhead_ms * 1e-3;
        Ok(Some(comm))
    }
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let graph = args.graph.graph()?;
    let cost = CostModel {
        forward_seconds: args.forward_seconds,
        planner_devices: args.planner_devices,
        planner_cp: args.planner_cp,
        comm: args.comm()?,
    };
    let sim = simulate(&graph, args.devices, cost)?;
    if let Some(path) = &args.trace {
        let planner =
            if args.planner_cp { "planner sharded over them".to_string() } else { format!("{} planner devices", args.planner_devices) };
        let executor = format!("simulated ({} stage devices, {planner})", args.devices);
        sim.trace.write(&graph, &executor, path)?;
    }
    let round = |x: f64| (x * 1e9).round() / 1e9;
    let report = serde_json::json!({
        "schedule": graph.schedule,
        "latents": graph.contract.config.latents,
        "stages": graph.contract.stages(),
        "devices": args.devices,
        "planner_devices": args.planner_devices,
        "planner_cp": args.planner_cp,
        "forward_seconds": args.forward_seconds,
        "forwards": graph.counts().forwards,
        "seconds": round(sim.seconds),
        "rounds": round(sim.rounds),
        "ttff_seconds": round(sim.ttff_seconds),
        "slowest_worker_busy_seconds": round(sim.slowest_worker_busy_seconds),
        "comm_seconds": round(sim.comm_seconds),
        "comm_bytes": sim.comm_bytes.round(),
        "model": (!args.free_comm).then_some(&args.model),
    });
    print_report(&report, args.json);
    Ok(ExitCode::SUCCESS)
}
