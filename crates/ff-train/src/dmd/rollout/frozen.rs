//! [`FrozenPlanner`]: anchors from a planner that Phase 2 does not train (`DmdConfig::planner_steps
//! > 0`), sampled exactly as inference samples it: the contract's planner graph (its guided Euler
//! steps and clean-endpoint forwards, [`GraphBuilder::planner`]) run by the executors'
//! [`DitRunner`] on one worker. The renderer then trains on the anchors it reads at inference.
//!
//! The anchors of a caption are drawn once, from noise seeded by the caption's bytes, and kept
//! (`[1, C, |P|, h, w]` f32 on the host): a frozen planner's anchors do not change between steps,
//! and a guided Euler block costs `2N` forwards, more than the rollout it feeds. A resumed run
//! draws the same anchors. The bank (clean-endpoint K/V of each anchor) is recomputed per
//! rollout, one forward per block ([`publish`]).
//!
//! The store is bounded: [`ANCHOR_STORE_BYTES`] (2 GiB) by default, the oldest captions dropped
//! first. At 1.3B / 480p one caption's 9 anchors are 16 × 9 × 60 × 104 × 4 B ≈ 3.6 MB, so the
//! bound keeps ~590 captions in 1/64 of a 128 GiB training node's memory, beside the dataset's
//! clips, the frozen models and the input pipeline; without it a dataset of a million captions
//! would need 3.6 TB. A dropped caption is drawn again from the same seed, the same
//! anchors (the planner run is deterministic), at the cost of its Euler steps.

use super::publish;
use crate::Result;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{Tensor, TensorData};
use ff_model::dit::{ChunkKv, LayerKv};
use ff_model::{AttentionBackend, WanDit};
use ff_sched::exec::{DitRunner, NoiseSpec, Placement, execute};
use ff_sched::schedule::{GraphBuilder, NodeKind};
use ff_sched::{Contract, Graph};
use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

/// The default bound of a [`FrozenPlanner`]'s anchor store in bytes (see the module docs).
pub const ANCHOR_STORE_BYTES: usize = 2 << 30;

/// The anchors a rollout renders around and their bank, without gradients.
pub struct Planned<B: AttentionBackend> {
    /// Clean anchors, `[1, C, |P|, h, w]` (positions `contract.anchors`).
    pub anchors: Tensor<B, 5>,
    /// `bank[a]`: the clean-endpoint K/V of anchor `a`.
    pub bank: Vec<ChunkKv<B>>,
}

impl<B: AttentionBackend> Planned<B> {
    /// The same values moved to `device`.
    pub fn to_device(self, device: &B::Device) -> Self {
        let layer = |l: LayerKv<B>| LayerKv { k: l.k.to_device(device), v: l.v.to_device(device) };
        Planned {
            anchors: self.anchors.to_device(device),
            bank: self.bank.into_iter().map(|kv| ChunkKv { layers: kv.layers.into_iter().map(layer).collect() }).collect(),
        }
    }

    /// The same values on the autodiff backend `A` over `B` (constants of its graph).
    pub fn lift<A: AutodiffBackend<InnerBackend = B> + AttentionBackend>(self) -> Planned<A> {
        let layer = |l: LayerKv<B>| LayerKv { k: Tensor::from_inner(l.k), v: Tensor::from_inner(l.v) };
        Planned {
            anchors: Tensor::from_inner(self.anchors),
            bank: self.bank.into_iter().map(|kv| ChunkKv { layers: kv.layers.into_iter().map(layer).collect() }).collect(),
        }
    }
}

/// A frozen plain (merged) planner DiT and the anchors it drew per caption (at most `limit`
/// bytes of them, the oldest dropped first).
pub struct FrozenPlanner<B: AttentionBackend> {
    model: WanDit<B>,
    drawn: Mutex<Store>,
}

/// Anchors by caption, in insertion order, and their bytes.
#[derive(Default)]
struct Store {
    anchors: HashMap<String, TensorData>,
    order: VecDeque<String>,
    bytes: usize,
    limit: usize,
}

impl Store {
    /// Keeps `anchors` of `caption`, dropping the oldest captions to stay within the limit (a
    /// caption larger than the whole limit is not kept).
    fn insert(&mut self, caption: &str, anchors: TensorData) {
        let size = anchors.bytes.len();
        if size > self.limit {
            return;
        }
        while self.bytes + size > self.limit {
            let Some(old) = self.order.pop_front() else { break };
            self.bytes -= self.anchors.remove(&old).map_or(0, |a| a.bytes.len());
        }
        self.order.push_back(caption.to_string());
        self.anchors.insert(caption.to_string(), anchors);
        self.bytes += size;
    }
}

/// The noise seed of `caption`'s anchors: FNV-1a of its bytes, stable across runs and
/// platforms (generating the caption with this seed draws the same planner noise).
pub fn rollout_seed(caption: &str) -> u64 {
    caption.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

impl<B: AttentionBackend> FrozenPlanner<B> {
    /// `model`: a plain DiT (an exported planner, or a Phase 1 run's planner role merged).
    pub fn new(model: WanDit<B>) -> Self {
        Self { model, drawn: Mutex::new(Store { limit: ANCHOR_STORE_BYTES, ..Store::default() }) }
    }

    /// The same planner with its anchor store bounded to `bytes`.
    pub fn with_store_bytes(self, bytes: usize) -> Self {
        self.drawn.lock().expect("no panic while drawing").limit = bytes;
        self
    }

    /// Captions whose anchors are kept, and their bytes.
    pub fn stored(&self) -> (usize, usize) {
        let store = self.drawn.lock().expect("no panic while drawing");
        (store.anchors.len(), store.bytes)
    }

    /// The frozen planner DiT.
    pub fn model(&self) -> &WanDit<B> {
        &self.model
    }

    /// The anchors of `caption` (prompt `[1, text_tokens, text_dim]`, guidance's empty prompt
    /// likewise, latents of `channels × height × width`) under `contract`, and their bank.
    pub fn plan(
        &self,
        contract: &Contract,
        caption: &str,
        prompt: Tensor<B, 3>,
        empty: Tensor<B, 3>,
        [channels, height, width]: [usize; 3],
    ) -> Result<Planned<B>> {
        let device = self.model.device();
        let known = self.drawn.lock().expect("no panic while drawing").anchors.get(caption).cloned();
        let anchors = match known {
            Some(data) => Tensor::from_data(data, &device),
            None => {
                let noise = NoiseSpec { seed: rollout_seed(caption), channels, height, width };
                let runner = DitRunner::new(&self.model, prompt.clone(), contract, noise).with_empty_prompt(empty);
                let run = execute(&planner_graph(contract)?, &Placement::serial(), vec![runner])?;
                let anchors = Tensor::cat(run.outputs, 2);
                self.drawn.lock().expect("no panic while drawing").insert(caption, anchors.to_data());
                anchors
            }
        };
        let text = self.model.text_context(prompt);
        let mut bank = Vec::with_capacity(contract.anchors.len());
        for (j, block) in contract.blocks.iter().enumerate() {
            let x0 = anchors.clone().narrow(2, block.start, block.len());
            publish(&self.model, &text, contract, j, x0, &mut bank)?;
        }
        Ok(Planned { anchors, bank })
    }
}

/// The contract's planner alone, each block's clean-endpoint node an output (its input is the
/// block's clean anchors).
fn planner_graph(contract: &Contract) -> Result<Graph> {
    let mut builder = GraphBuilder::new(contract);
    builder.planner()?;
    let mut graph = builder.finish("planner");
    for node in &mut graph.nodes {
        node.output = node.kind == NodeKind::PlannerCache;
    }
    Ok(graph)
}
