//! Placement of graph nodes on workers and a discrete-event replay of a graph (the latency model).
//!
//! Model (also in docs/BENCHMARKS.md): every worker is one device and runs its nodes one at a
//! time, **in node-id order** (the same order the executors use); a node starts when its worker is
//! free and all its dependencies (and the data they send, below) have arrived; a forward over `f`
//! latent frames costs `C·f/B_R` (linear in tokens: block-sized renderer, planner and re-encode
//! forwards cost `C`, paper A.1; a whole-clip bidirectional forward costs `C·L/B_R`, attention's
//! quadratic term is ignored; a node of two passes, a guided planner step, costs twice).
//! Renderer-stage nodes of stage k go to worker `k mod stage_workers`. Planner nodes share worker
//! 0 before rendering (the paper's 4-device FlashForward), run on every stage worker at once as
//! one context-parallel forward before rendering (FlashForward-CP), or run on a dedicated
//! planner worker (streaming); `K` dedicated planner devices are modelled as one worker whose
//! forwards are context-parallel over `K`.
//!
//! Without a [`CommModel`] communication is free and a CP forward costs its largest shard's
//! frames. With one, latents, K/V pulls, CP exchanges and role-weight swaps cost link time and
//! bytes as [`comm`] documents, and the replay reports both.

pub mod comm;

pub use comm::{CommModel, Link, Traffic};

use crate::error::{Result, SchedError};
use crate::exec::Placement;
use crate::schedule::{Graph, KvKey, Node, NodeId};
use crate::trace::{Span, Trace};
use std::collections::HashMap;

/// Replays `graph` on `placement` with per-node cost `cost` and free communication, returning
/// the timeline.
pub fn replay(graph: &Graph, placement: &Placement, cost: impl Fn(&Node) -> f64) -> Trace {
    replay_with(graph, placement, |n| comm::ForwardCost { seconds: cost(n), ..Default::default() }, None).0
}

/// Link time and bytes of one replay.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Comm {
    seconds: f64,
    bytes: f64,
}

impl Comm {
    /// Adds one message; returns its seconds.
    fn send(&mut self, link: &Link, bytes: f64) -> f64 {
        let t = link.seconds(bytes);
        self.seconds += t;
        self.bytes += bytes;
        t
    }
}

/// The replay engine: `cost` gives each node's forward time (and the link time and bytes inside
/// it, the CP exchanges); `comm` adds the messages between workers and role-weight swaps.
fn replay_with(graph: &Graph, placement: &Placement, cost: impl Fn(&Node) -> comm::ForwardCost, comm: Option<&CommModel>) -> (Trace, Comm) {
    let mut free = vec![0.0f64; placement.workers()];
    let mut end = vec![0.0f64; graph.nodes.len()];
    let mut spans = Vec::with_capacity(graph.nodes.len());
    let mut total = Comm::default();
    let publisher: HashMap<KvKey, NodeId> = graph.nodes.iter().flat_map(|n| n.publishes.iter().map(move |k| (*k, n.id))).collect();
    let mut pulled: HashMap<(usize, NodeId), f64> = HashMap::new();
    let mut planned = vec![false; placement.workers()];
    let mut swapped = vec![false; placement.workers()];
    for node in &graph.nodes {
        let workers = placement.workers_of(node);
        let worker = placement.worker_of(node);
        let mut ready = node.deps.iter().map(|&d| end[d]).fold(0.0, f64::max);
        if let Some(m) = comm {
            let elsewhere = |id: NodeId| !placement.workers_of(&graph.nodes[id]).contains(&worker);
            if let Some(src) = node.source.filter(|&s| elsewhere(s)) {
                let bytes = (node.positions.len() * m.traffic.latent_frame_bytes) as f64;
                ready = ready.max(end[src] + total.send(&m.link, bytes));
            }
            for key in &node.reads {
                let Some(&p) = publisher.get(key).filter(|&&p| elsewhere(p)) else { continue };
                let arrival = *pulled.entry((worker, p)).or_insert_with(|| {
                    let frames: usize = graph.nodes[p].publishes.iter().map(|k| key_frames(graph, &publisher, k)).sum();
                    end[p] + total.send(&m.link, (frames * m.traffic.kv.frame_bytes()) as f64)
                });
                ready = ready.max(arrival);
            }
            for w in workers.clone() {
                if node.kind.is_planner() {
                    planned[w] = true;
                } else if planned[w] && !swapped[w] {
                    swapped[w] = true;
                    free[w] += total.send(&m.host, m.traffic.role_weight_bytes as f64);
                }
            }
        }
        let start = workers.clone().map(|w| free[w]).fold(ready, f64::max);
        let c = cost(node);
        total.seconds += c.comm_seconds;
        total.bytes += c.comm_bytes;
        end[node.id] = start + c.seconds;
        for w in workers {
            free[w] = end[node.id];
            spans.push(Span { node: node.id, worker: w, start, end: end[node.id] });
        }
    }
    (Trace { workers: placement.workers(), spans, names: placement.names(graph.contract.stages()) }, total)
}

/// Latent frames of one published entry (an anchor is one frame, a chunk its publisher's).
fn key_frames(graph: &Graph, publisher: &HashMap<KvKey, NodeId>, key: &KvKey) -> usize {
    match key {
        KvKey::Anchor(_) => 1,
        KvKey::Chunk { .. } => publisher.get(key).map_or(0, |&p| graph.nodes[p].positions.len()),
    }
}

/// Pipeline rounds with one worker per stage and the planner sharing the stage workers: the
/// paper's `R` (unit forward cost).
pub fn rounds(graph: &Graph) -> usize {
    replay(graph, &Placement::wavefront(graph.contract.stages()), |n| n.passes as f64).makespan().round() as usize
}

/// Cost model of [`simulate`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CostModel {
    /// Seconds of one forward over `B_R` latent frames on one device.
    pub forward_seconds: f64,
    /// Dedicated planner devices (0: the planner runs on the stage devices first); more than one
    /// shards each planner forward over them.
    pub planner_devices: usize,
    /// With the planner on the stage devices: shard each planner forward over all of them
    /// (FlashForward-CP) instead of running it on device 0.
    pub planner_cp: bool,
    /// Links and bytes; `None`: communication is free.
    pub comm: Option<CommModel>,
}

impl CostModel {
    /// `forward_seconds` per block-sized forward, the planner on the stage devices, free
    /// communication.
    pub fn new(forward_seconds: f64) -> Self {
        Self { forward_seconds, planner_devices: 0, planner_cp: false, comm: None }
    }
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
    /// Link time of every message (latents, K/V, CP exchanges, role-weight swaps), summed over
    /// devices (each of a CP all-gather's `D·(D − 1)` messages a layer counts); messages overlap
    /// compute except a CP forward's exchange (one device's ring) and the swaps.
    pub comm_seconds: f64,
    /// Bytes of every message, summed over devices.
    pub comm_bytes: f64,
    /// The replayed timeline.
    #[serde(skip)]
    pub trace: Trace,
}

/// Replays `graph` on `devices` stage workers under `cost`; a forward cost that is not a
/// positive finite number of seconds, no device, a bad link, or CP asked of both planner
/// allocations is [`SchedError::Config`].
///
/// FlashForward at L = 81 on 4 devices, planner shared: the 15 planner forwards, then the
/// wavefront of 27 chunks through 4 stages, 45 rounds in all.
///
/// ```
/// use ff_sched::sim::{CostModel, simulate};
/// use ff_sched::{Contract, ContractConfig, ScheduleKind};
///
/// let graph = ScheduleKind::FlashForward.build(&Contract::new(ContractConfig::new(81)).unwrap()).unwrap();
/// let sim = simulate(&graph, 4, CostModel::new(2.0)).unwrap();
/// assert_eq!((sim.seconds, sim.rounds), (2.0 * 45.0, 45.0));
/// assert_eq!(sim.ttff_seconds, 2.0 * 19.0); // chunk 0 leaves stage 3 after 15 + 4 forwards
/// ```
pub fn simulate(graph: &Graph, devices: usize, cost: CostModel) -> Result<Simulation> {
    if !(cost.forward_seconds > 0.0 && cost.forward_seconds.is_finite()) {
        return Err(SchedError::Config(format!("the forward cost must be positive seconds, got {}", cost.forward_seconds)));
    }
    let (placement, planner_shards) = match (cost.planner_devices, cost.planner_cp) {
        (0, false) => (Placement::wavefront(devices), 1),
        (0, true) => (Placement::context_parallel(devices), devices),
        (k, false) => (Placement::streaming(devices), k),
        (_, true) => {
            return Err(SchedError::Config(
                "context parallelism over the stage devices needs the planner on them (no dedicated planner devices)".into(),
            ));
        }
    };
    placement.validate()?;
    if let Some(m) = &cost.comm {
        m.validate()?;
    }
    let per_frame = cost.forward_seconds / graph.contract.config.chunk as f64;
    let (trace, comm) = replay_with(
        graph,
        &placement,
        |n| {
            let shards = if n.kind.is_planner() { planner_shards } else { 1 };
            comm::sharded_forward(per_frame, n.positions.len(), n.passes, shards, cost.comm.as_ref())
        },
        cost.comm.as_ref(),
    );
    let seconds = trace.makespan();
    Ok(Simulation {
        seconds,
        rounds: seconds / cost.forward_seconds,
        ttff_seconds: trace.ttff(graph),
        slowest_worker_busy_seconds: trace.busy().into_iter().fold(0.0, f64::max),
        comm_seconds: comm.seconds,
        comm_bytes: comm.bytes,
        trace,
    })
}

#[cfg(test)]
mod tests;
