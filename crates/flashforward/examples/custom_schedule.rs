//! A state contract of one's own, run end to end by the pipeline: every renderer chunk reads a
//! window of **2** anchors (the two that bracket it) and the stage-matched history of the **3**
//! chunks before it. The graph comes from the public builder (the planner as in FlashForward,
//! then the chunk × stage rollout under a `Rule`), is handed to the default model as a request,
//! runs on the serial and the wavefront executors, and both videos must be identical.
//!
//! Run: `cargo run --release -p flashforward --example custom_schedule`

use flashforward::ff_sched::schedule::{GraphBuilder, HistorySource, Rule};
use flashforward::ff_sched::{Contract, ContractConfig};
use flashforward::{Executor, Model, Pipeline, Request};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let model = Model::open_dir(flashforward::default_model_dir()?)?;
    // The student's own contract at 21 latents (anchors 0, 10, 20), with G = 2 and H = 3.
    let trained = model.student.as_ref().map_or(ContractConfig::new(21), |s| s.contract_at(21));
    let contract = Contract::new(trained.with_anchor_window(2).with_history(3))?;
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

    let pipe = Pipeline::<flashforward::Cpu>::load_on(model, &[Default::default()])?;
    let request = Request::new("a green square moves right").graph(graph).seed(1);
    let mut videos = Vec::new();
    for executor in [Executor::Serial, Executor::Wavefront] {
        let video = pipe.generate(&request.clone().executor(executor))?;
        let r = video.report();
        println!("{executor:<10} {} frames, {} forwards, denoising {:.2} s", video.frames().len(), r.forwards, r.denoise.as_secs_f64());
        videos.push(video);
    }
    if videos[0].frames() != videos[1].frames() {
        return Err("the wavefront executor's video differs from the serial one".into());
    }
    println!(
        "serial and wavefront videos are identical; {}",
        videos[0].write_mp4(std::env::temp_dir().join("custom_schedule.mp4"))?.display()
    );
    Ok(())
}
