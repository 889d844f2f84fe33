//! Placement of graph nodes on workers and a discrete-event replay of a graph (the latency model).
//!
//! Model (also in docs/BENCHMARKS.md): every worker is one device and runs its nodes one at a
//! time, **in node-id order** (the same order the executors use); a node starts when its worker is
//! free and all its dependencies have finished; a forward over `f` latent frames costs
//! `C·f/B_R` (linear in tokens: block-sized renderer, planner and re-encode forwards cost `C`,
//! paper A.1; a whole-clip bidirectional forward costs `C·L/B_R`, attention's quadratic term is
//! ignored; a node of two passes, a guided planner step, costs twice); communication (latents between stage
//! workers, anchor broadcast) is free and overlaps compute; role-weight swaps and context
//! parallelism of the baselines are not modelled. Renderer-stage nodes of stage k go to worker
//! `k mod stage_workers`. Planner nodes either share worker 0 before rendering (the paper's
//! 4-device FlashForward) or run on a dedicated planner worker (streaming); `K` dedicated planner
//! devices are modelled as one worker with ideal context parallelism (forward cost / K).

use crate::error::{Result, SchedError};
use crate::exec::Placement;
use crate::schedule::{Graph, Node};
use crate::trace::{Span, Trace};

/// Replays `graph` on `placement` with per-node cost `cost`, returning the timeline.
pub fn replay(graph: &Graph, placement: &Placement, cost: impl Fn(&Node) -> f64) -> Trace {
    let mut free = vec![0.0f64; placement.workers()];
    let mut end = vec![0.0f64; graph.nodes.len()];
    let mut spans = Vec::with_capacity(graph.nodes.len());
    for node in &graph.nodes {
        let worker = placement.worker_of(node);
        let ready = node.deps.iter().map(|&d| end[d]).fold(0.0, f64::max);
        let start = free[worker].max(ready);
        end[node.id] = start + cost(node);
        free[worker] = end[node.id];
        spans.push(Span { node: node.id, worker, start, end: end[node.id] });
    }
    Trace { workers: placement.workers(), spans, names: placement.names(graph.contract.stages()) }
}

/// Pipeline rounds with one worker per stage and the planner sharing the stage workers: the
/// paper's `R` (unit forward cost).
pub fn rounds(graph: &Graph) -> usize {
    replay(graph, &Placement::wavefront(graph.contract.stages()), |n| n.passes as f64).makespan().round() as usize
}

/// Cost model of [`simulate`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CostModel {
    /// Seconds of one forward over `B_R` latent frames.
    pub forward_seconds: f64,
    /// Dedicated planner devices (0: the planner shares the stage devices).
    pub planner_devices: usize,
}

/// Result of [`simulate`].
#[derive(Debug, Clone, serde::Serialize)]
pub struct Simulation {
    /// Makespan: end of the last forward, seconds.
    pub seconds: f64,
    /// `seconds / forward_seconds`.
    pub rounds: f64,
    /// Time to first chunk: end of the output forward of the first latent position, seconds.
    pub ttff_seconds: f64,
    /// Longest busy time of one worker.
    pub slowest_worker_busy_seconds: f64,
    /// The replayed timeline.
    #[serde(skip)]
    pub trace: Trace,
}

/// Replays `graph` on `devices` stage workers under `cost`; a forward cost that is not a
/// positive finite number of seconds, or no device, is [`SchedError::Config`].
///
/// FlashForward at L = 81 on 4 devices, planner shared: the 15 planner forwards, then the
/// wavefront of 27 chunks through 4 stages, 45 rounds in all.
///
/// ```
/// use ff_sched::sim::{CostModel, simulate};
/// use ff_sched::{Contract, ContractConfig, ScheduleKind};
///
/// let graph = ScheduleKind::FlashForward.build(&Contract::new(ContractConfig::new(81)).unwrap()).unwrap();
/// let sim = simulate(&graph, 4, CostModel { forward_seconds: 2.0, planner_devices: 0 }).unwrap();
/// assert_eq!((sim.seconds, sim.rounds), (2.0 * 45.0, 45.0));
/// assert_eq!(sim.ttff_seconds, 2.0 * 19.0); // chunk 0 leaves stage 3 after 15 + 4 forwards
/// ```
pub fn simulate(graph: &Graph, devices: usize, cost: CostModel) -> Result<Simulation> {
    if !(cost.forward_seconds > 0.0 && cost.forward_seconds.is_finite()) {
        return Err(SchedError::Config(format!("the forward cost must be positive seconds, got {}", cost.forward_seconds)));
    }
    let placement = match cost.planner_devices {
        0 => Placement::wavefront(devices),
        _ => Placement::streaming(devices),
    };
    placement.validate()?;
    let per_frame = cost.forward_seconds / graph.contract.config.chunk as f64;
    let planner_speedup = cost.planner_devices.max(1) as f64;
    let trace = replay(graph, &placement, |n| {
        let c = per_frame * (n.positions.len() * n.passes) as f64;
        if n.kind.is_planner() { c / planner_speedup } else { c }
    });
    let seconds = trace.makespan();
    Ok(Simulation {
        seconds,
        rounds: seconds / cost.forward_seconds,
        ttff_seconds: trace.ttff(graph),
        slowest_worker_busy_seconds: trace.busy().into_iter().fold(0.0, f64::max),
        trace,
    })
}

#[cfg(test)]
mod tests;
