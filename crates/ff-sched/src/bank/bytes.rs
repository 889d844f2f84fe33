//! How many bank slots each worker holds, and the bytes that takes.
//!
//! A worker holds the banks its nodes read or publish. History banks hold `graph.history_capacity`
//! chunks each (FlashForward: H per stage; baselines: what fits in W_ctx). Anchor slots: a worker
//! that runs the planner *and* renders (the shared prologue of the paper's 4-device setup) keeps
//! the whole plan, `M = |P|` anchors (≈ L/Δ frames); a planner-only worker keeps a ring of
//! `planner_context + B_P` anchors (its context plus the block it publishes); a renderer-only
//! worker keeps `B_P + G − 1` (its `G`-anchor window plus the rest of the block that completes it:
//! it pulls anchor blocks in order, only when a window needs them). Every count except the shared
//! prologue's anchor plan is independent of L. A context-parallel planner runs on every stage
//! worker, and each keeps the whole plan (the all-gather leaves every shard the full K/V). K/V in flight between workers is bounded by the
//! executor's links (see `exec`), not planned here.

use crate::exec::Placement;
use crate::schedule::{Graph, KvKey, NodeKind};
use ff_model::dit::DitConfig;

/// Sizes of one latent frame's K/V.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KvDims {
    /// Transformer blocks, each with its own K and V.
    pub layers: usize,
    /// Model width (heads × head_dim).
    pub dim: usize,
    /// Tokens of one latent frame after patching: `(height / ph) · (width / pw)`.
    pub tokens_per_frame: usize,
    /// Bytes per element (4 for f32, 2 for bf16).
    pub dtype_bytes: usize,
}

impl KvDims {
    /// Dimensions of `config`'s K/V for latent frames of `height × width`.
    pub fn from_dit(config: &DitConfig, height: usize, width: usize, dtype_bytes: usize) -> Self {
        let [_, ph, pw] = config.patch_size;
        Self { layers: config.num_layers, dim: config.dim, tokens_per_frame: (height / ph) * (width / pw), dtype_bytes }
    }

    /// Keys and values of all layers for one latent frame.
    pub fn frame_bytes(&self) -> usize {
        2 * self.layers * self.dim * self.tokens_per_frame * self.dtype_bytes
    }
}

/// The banks of one worker.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct WorkerBanks {
    /// The worker's index in its placement.
    pub worker: usize,
    /// Anchor frames the worker's anchor bank holds (see the module docs).
    pub anchor_slots: usize,
    /// History banks held (ids).
    pub history_banks: Vec<usize>,
    /// Latent frames of K/V the banks can hold.
    pub frames: usize,
}

impl WorkerBanks {
    /// Bytes the banks take when full.
    pub fn bytes(&self, dims: &KvDims) -> usize {
        self.frames * dims.frame_bytes()
    }
}

/// Bank slots of every worker of `placement` running `graph`.
pub fn bank_plan(graph: &Graph, placement: &Placement) -> Vec<WorkerBanks> {
    let c = &graph.contract;
    let (m, bp) = (c.anchors.len(), c.config.planner_block);
    (0..placement.workers())
        .map(|worker| {
            let nodes: Vec<_> = graph.nodes.iter().filter(|n| placement.workers_of(n).contains(&worker)).collect();
            let keys = || nodes.iter().flat_map(|n| n.reads.iter().chain(&n.publishes));
            let uses_anchors = keys().any(|k| matches!(k, KvKey::Anchor(_)));
            let plans = nodes.iter().any(|n| n.kind.is_planner());
            let renders = nodes.iter().any(|n| n.kind == NodeKind::Render);
            let anchor_slots = match (uses_anchors, plans, renders) {
                (false, ..) => 0,
                (true, true, true) => m,
                (true, true, false) => m.min(c.config.planner_context + bp),
                (true, false, _) => m.min(bp + c.config.anchor_window - 1),
            };
            let mut history_banks: Vec<usize> = keys()
                .filter_map(|k| match k {
                    KvKey::Chunk { bank, .. } => Some(*bank),
                    KvKey::Anchor(_) => None,
                })
                .collect();
            history_banks.sort_unstable();
            history_banks.dedup();
            let frames = anchor_slots + history_banks.len() * graph.history_capacity * c.config.chunk;
            WorkerBanks { worker, anchor_slots, history_banks, frames }
        })
        .collect()
}
