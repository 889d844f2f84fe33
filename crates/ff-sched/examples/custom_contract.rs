//! A state contract of one's own, run on the serial and the wavefront executors.
//!
//! The contract: every renderer chunk reads a window Γ of **2** anchors (the two neighbouring
//! anchors that bracket it) and the stage-matched history of the **3** chunks before it. The
//! graph comes from the public builder: the planner as in FlashForward, then the chunk × stage
//! rollout under a `Rule`. The example runs it with the tiny random Wan DiT on the CPU, once on
//! one worker and once on one worker per stage, and checks that both give the same video.
//!
//! Run: `cargo run -p ff-sched --example custom_contract`

use burn::backend::NdArray;
use burn::tensor::{Distribution, Tensor};
use ff_model::dit::DitConfig;
use ff_sched::exec::{DitRunner, NoiseSpec, Placement, execute};
use ff_sched::schedule::{GraphBuilder, HistorySource, Rule};
use ff_sched::{Contract, ContractConfig};

type B = NdArray;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // 21 latents, anchors {0, 10, 20}; windows of G = 2 anchors share an endpoint: {0,10}, {10,20}
    let contract = Contract::new(ContractConfig::new(21).with_anchor_window(2).with_history(3))?;
    let gamma = |chunk: usize| contract.window(chunk).collect::<Vec<usize>>();
    let mut builder = GraphBuilder::new(&contract);
    builder.planner()?;
    builder.rollout(&Rule { anchors: Some(&gamma), history: HistorySource::StageMatched, history_len: 3 })?;
    let graph = builder.finish("gamma2-h3");

    let counts = graph.counts();
    println!(
        "schedule {}: {} forwards ({} planner, {} cache-update)",
        graph.schedule, counts.forwards, counts.planner_forwards, counts.cache_update_forwards
    );
    for i in [0, 3, 6] {
        let n = graph.nodes.iter().find(|n| n.unit == ff_sched::schedule::Unit::Chunk(i) && n.level == 1).expect("chunk node");
        println!("chunk {i} at stage 1 reads {:?}", n.reads);
    }

    let device = Default::default();
    let dit = DitConfig::tiny();
    let model = dit.init::<B>(&device);
    let text = Tensor::<B, 3>::random([1, 6, dit.text_dim], Distribution::Normal(0.0, 1.0), &device);
    let noise = NoiseSpec { seed: 7, channels: dit.in_channels, height: 4, width: 4 };
    let runner = DitRunner::new(&model, text, &contract, noise);

    println!("{:<10} {:>8} {:>10} {:>16}", "executor", "workers", "forwards", "makespan (s)");
    let mut videos = Vec::new();
    for (name, placement) in [("serial", Placement::serial()), ("wavefront", Placement::wavefront(contract.stages()))] {
        let run = execute(&graph, &placement, vec![runner.clone(); placement.workers()])?;
        println!("{name:<10} {:>8} {:>10} {:>16.3}", placement.workers(), run.forwards, run.trace.makespan());
        videos.push(Tensor::cat(run.outputs, 2).into_data().to_vec::<f32>()?);
    }
    if videos[0] != videos[1] {
        return Err("the wavefront executor's video differs from the serial one".into());
    }
    println!("serial and wavefront videos are identical ({} values)", videos[0].len());
    Ok(())
}
