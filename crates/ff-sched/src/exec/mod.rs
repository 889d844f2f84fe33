//! Executors: run a [`Graph`] on workers placed by a [`Placement`].
//!
//! One engine serves every executor. Each worker (a thread; worker 0 is the calling thread) owns
//! a [`Runner`] (its model copy on its device) and its [`Banks`](crate::bank::Banks), and runs its
//! nodes in id order.
//! Only two things travel between workers, over channels: x0 latents to the workers of the nodes
//! that take them as input, and published K/V entries to the workers whose nodes read them (with
//! FlashForward on one worker per stage: latents k → k+1 and the anchor broadcast; each stage bank
//! stays on its worker). A worker pulls messages only when a node needs them, so a bounded bank
//! is never overrun by a fast producer. Every dependency has a smaller id. K/V travels over one
//! bounded link per (publisher, reader) pair: a dedicated planner blocks when a reader has a block
//! and a window step unread, so K/V alive in channels does not grow with the video.
//!
//! * serial: [`Placement::serial`];
//! * wavefront: [`Placement::wavefront`] (planner first on worker 0, then one worker per stage);
//! * streaming: [`Placement::streaming`] (a dedicated planner worker publishes anchor blocks while
//!   the wavefront renders; a renderer waits only for the anchors of its own window);
//! * context-parallel planner: [`Placement::context_parallel`] (FlashForward-CP: every stage
//!   worker runs its shard of each planner forward, the runners exchanging K/V among themselves,
//!   `ff_model::dit::context_parallel`'s all-gather; each ends with the whole x0 and anchor K/V,
//!   then the wavefront renders as usual);
//! * batched diagonal: [`execute_batched`] (one worker; the independent nodes of each dependency
//!   wave, FlashForward's anti-diagonals, run as one forward with one batch element per node).
//!
//! Noise is drawn per (frame position, level) from a counter-based stream ([`NoiseSpec`]), so
//! every executor produces bit-identical latents to serial.
//!
//! Threads: each worker runs inside its own rayon pool, the caller's rayon threads (all cores, or
//! `RAYON_NUM_THREADS`) shared evenly among the workers, at least one each ([`worker_threads`]).
//! CPU backends (Flex's gemm, NdArray's threaded matmul) run their parallel loops in the pool of
//! the calling thread, so S stage workers on C cores run max(C, S) threads, not S × C; serial
//! keeps all C. The bit-identity above holds with threads on as long as the backend's kernels do
//! not make their summation order depend on the thread count (gemm splits output tiles, never
//! the reduction; `threads_tests` checks it on Flex). GPU backends ignore the pools.

mod batch;
mod batched;
mod dit;
mod noise;
mod placement;
mod prompts;
mod worker;

pub use batched::{execute_batched, waves};
pub use dit::{DitRunner, Roles};
pub use noise::{NoiseSpec, OUTPUT_STREAM, PLANNER_STREAM};
pub use placement::{Placement, PlannerPlacement};
pub use prompts::{Across, Carry, LiveSource, Prompts, Segment};
pub use worker::{worker_pools, worker_threads};

use crate::bank::{Entry, WorkerBanks, bank_plan};
use crate::error::{Result, SchedError};
use crate::schedule::{Graph, Node, NodeId};
use crate::trace::Trace;

/// What running one node gives: its x0 estimate and one K/V entry per published key.
pub type NodeResult<R> = (<R as Runner>::Latent, Vec<<R as Runner>::Kv>);

/// Runs single nodes on one worker's device.
pub trait Runner: Send {
    /// An x0 latent (a node's output).
    type Latent: Clone + Send;
    /// One published K/V entry.
    type Kv: Entry + Clone + Send;

    /// Runs `node`: `source` is the x0 of its source node (None: start from pure noise), `reads`
    /// the entries of `node.reads` in order. Returns the node's x0 estimate and one entry per key
    /// of `node.publishes`.
    fn run(&mut self, node: &Node, source: Option<&Self::Latent>, reads: &[&Self::Kv]) -> Result<(Self::Latent, Vec<Self::Kv>)>;

    /// Runs independent `nodes` (no node reads what another publishes or takes another's output)
    /// as one forward where the runner can; the default runs them one by one. Returns one result
    /// per node, as [`Runner::run`].
    fn run_batch(&mut self, nodes: &[&Node], sources: &[Option<&Self::Latent>], reads: &[Vec<&Self::Kv>]) -> Result<Vec<NodeResult<Self>>> {
        nodes.iter().zip(sources).zip(reads).map(|((n, s), r)| self.run(n, *s, r)).collect()
    }

    /// `Some((s, n))` when this runner computes shard `s` of `n` of every planner forward and
    /// exchanges with the other shards itself ([`Placement::context_parallel`] needs it of every
    /// stage worker, `s` its index; e.g. [`DitRunner::with_planner_shard`]). Each shard's run
    /// returns the whole forward's x0 and K/V.
    fn planner_shard(&self) -> Option<(usize, usize)> {
        None
    }

    /// Moves a latent received from another worker onto this worker's device.
    fn adopt_latent(&self, latent: Self::Latent) -> Self::Latent {
        latent
    }

    /// Moves a K/V entry received from another worker onto this worker's device.
    fn adopt_kv(&self, kv: Self::Kv) -> Self::Kv {
        kv
    }
}

/// What an execution produced.
#[derive(Debug)]
pub struct Execution<X> {
    /// x0 of every output node, in position order (concatenate along frames for the video).
    pub outputs: Vec<X>,
    /// Measured spans (seconds since the start).
    pub trace: Trace,
    /// Model forward calls (fewer than nodes when the batched executor packs them).
    pub forwards: usize,
    /// Peak bytes of K/V each worker kept alive: its banks, plus the entries it had published that
    /// a reader on another worker had not taken yet (still on the publisher's device).
    pub peak_bank_bytes: Vec<usize>,
    /// The bank plan each worker ran with.
    pub banks: Vec<WorkerBanks>,
}

/// Runs `graph` with one runner per worker of `placement`.
pub fn execute<R: Runner>(graph: &Graph, placement: &Placement, runners: Vec<R>) -> Result<Execution<R::Latent>> {
    placement.validate()?;
    if runners.len() != placement.workers() {
        return Err(SchedError::Config(format!("{} runners for {} workers", runners.len(), placement.workers())));
    }
    if placement.planner == PlannerPlacement::Sharded {
        let n = placement.stage_workers;
        if let Some(w) = (0..n).find(|&w| runners[w].planner_shard() != Some((w, n))) {
            return Err(SchedError::Config(format!(
                "a context-parallel planner needs runner {w} to compute shard {w} of {n} of every planner forward (it reports {:?})",
                runners[w].planner_shard()
            )));
        }
    }
    let plans = bank_plan(graph, placement);
    let pools = worker::worker_pools(placement.workers())?;
    let results = worker::run_all(graph, placement, &plans, runners, &pools);
    let mut outputs: Vec<(NodeId, R::Latent)> = Vec::new();
    let mut spans = Vec::new();
    let mut peak = Vec::new();
    let mut first_err: Option<SchedError> = None;
    for result in results {
        match result {
            Ok(done) => {
                outputs.extend(done.outputs);
                spans.extend(done.spans);
                peak.push(done.peak_kv_bytes);
            }
            // a worker whose peer failed reports a closed channel; keep the root cause
            Err(e) if first_err.as_ref().is_none_or(|f| worker::is_peer_stop(f) && !worker::is_peer_stop(&e)) => first_err = Some(e),
            Err(_) => {}
        }
    }
    if let Some(e) = first_err {
        return Err(e);
    }
    let order = |id: NodeId| graph.nodes[id].positions.first().copied();
    outputs.sort_by_key(|(id, _)| order(*id));
    spans.sort_by(|a: &crate::trace::Span, b| a.start.total_cmp(&b.start));
    Ok(Execution {
        outputs: outputs.into_iter().map(|(_, x)| x).collect(),
        trace: Trace { workers: placement.workers(), spans, names: placement.names(graph.contract.stages()) },
        forwards: graph.nodes.len(),
        peak_bank_bytes: peak,
        banks: plans,
    })
}

#[cfg(test)]
mod dit_tests;
#[cfg(test)]
mod euler_tests;
#[cfg(test)]
mod flow_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod threads_tests;
