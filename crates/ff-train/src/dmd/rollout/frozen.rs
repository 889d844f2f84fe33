//! [`FrozenPlanner`]: anchors from a planner that Phase 2 does not train (`DmdConfig::planner_steps
//! > 0`), sampled exactly as inference samples it: the contract's planner graph (its guided Euler
//! steps and clean-endpoint forwards, [`GraphBuilder::planner`]) run by the executors'
//! [`DitRunner`] on one worker. The renderer then trains on the anchors it reads at inference.
//!
//! The anchors of a caption are drawn once, from noise seeded by the caption's bytes, and kept
//! (`[1, C, |P|, h, w]` on the host; a few KB per caption): a frozen planner's anchors do not
//! change between steps, and a guided Euler block costs `2N` forwards, more than the rollout it
//! feeds. A resumed run draws the same anchors. The bank (clean-endpoint K/V of each anchor) is
//! recomputed per rollout, one forward per block ([`publish`]).

use super::publish;
use crate::Result;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{Tensor, TensorData};
use ff_model::dit::{ChunkKv, LayerKv};
use ff_model::{AttentionBackend, WanDit};
use ff_sched::exec::{DitRunner, NoiseSpec, Placement, execute};
use ff_sched::schedule::{GraphBuilder, NodeKind};
use ff_sched::{Contract, Graph};
use std::collections::HashMap;
use std::sync::Mutex;

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

/// A frozen plain (merged) planner DiT and the anchors it drew per caption.
pub struct FrozenPlanner<B: AttentionBackend> {
    model: WanDit<B>,
    drawn: Mutex<HashMap<String, TensorData>>,
}

/// The noise seed of `caption`'s anchors: FNV-1a of its bytes, stable across runs and
/// platforms (generating the caption with this seed draws the same planner noise).
pub fn rollout_seed(caption: &str) -> u64 {
    caption.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

impl<B: AttentionBackend> FrozenPlanner<B> {
    /// `model`: a plain DiT (an exported planner, or a Phase 1 run's planner role merged).
    pub fn new(model: WanDit<B>) -> Self {
        Self { model, drawn: Mutex::new(HashMap::new()) }
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
        let known = self.drawn.lock().expect("no panic while drawing").get(caption).cloned();
        let anchors = match known {
            Some(data) => Tensor::from_data(data, &device),
            None => {
                let noise = NoiseSpec { seed: rollout_seed(caption), channels, height, width };
                let runner = DitRunner::new(&self.model, prompt.clone(), contract, noise).with_empty_prompt(empty);
                let run = execute(&planner_graph(contract)?, &Placement::serial(), vec![runner])?;
                let anchors = Tensor::cat(run.outputs, 2);
                self.drawn.lock().expect("no panic while drawing").insert(caption.to_string(), anchors.to_data());
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
