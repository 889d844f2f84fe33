//! [`DitRunner`]: runs graph nodes with the Wan DiT (`WanDit::forward_chunk`).
//!
//! Input of a node at level `l` with σ = σ_l: pure noise ε (no source), `(1 − σ)·x0 + σ·ε` with
//! fresh ε from the counter-based stream (a source and `l < S`), or the clean x0 (`l = S`, t = 0).
//! Output: `x0 = x − σ·v` from the velocity prediction; the final stage's x0 is the video.
//! Planner nodes run the planner model, all other nodes the renderer model; a model with roles is
//! merged into one full-weight model per role (as the paper serves them), a plain model serves
//! both. Published K/V: the chunk's entry, or one entry per anchor frame for planner blocks.

use super::Runner;
use super::noise::{NoiseSpec, OUTPUT_STREAM, PLANNER_STREAM};
use crate::bank::Entry;
use crate::contract::Contract;
use crate::error::{Result, SchedError};
use crate::schedule::{KvKey, Node};
use burn::module::Module;
use burn::tensor::{Tensor, backend::Backend};
use ff_model::FlowMatch;
use ff_model::dit::{ChunkKv, FrameLayout, LayerKv, Role, SegmentContext, TextContext, WanDit};

impl<B: Backend> Entry for ChunkKv<B> {
    fn bytes(&self) -> usize {
        ChunkKv::bytes(self)
    }
}

/// One worker's models, prompt context and noise stream.
#[derive(Clone)]
pub struct DitRunner<B: Backend> {
    planner: WanDit<B>,
    renderer: WanDit<B>,
    planner_text: TextContext<B>,
    renderer_text: TextContext<B>,
    noise: NoiseSpec,
    /// σ of every level `0..=S`.
    sigmas: Vec<f64>,
    device: B::Device,
}

impl<B: Backend> DitRunner<B> {
    /// Runner for `model` with prompt embeddings `text` (`[1, text_tokens, text_dim]`).
    pub fn new(model: &WanDit<B>, text: Tensor<B, 3>, contract: &Contract, noise: NoiseSpec) -> Self {
        let (planner, renderer) = match model.role_embedding {
            Some(_) => (model.merge(Role::Planner), model.merge(Role::Renderer)),
            None => (model.clone(), model.clone()),
        };
        Self {
            planner_text: planner.text_context(text.clone()),
            renderer_text: renderer.text_context(text),
            planner,
            renderer,
            noise,
            sigmas: (0..=contract.stages()).map(|l| contract.sigma(l)).collect(),
            device: model.device(),
        }
    }

    /// A copy of this runner on `device` (one per worker).
    pub fn to_device(&self, device: &B::Device) -> Self {
        let text = |t: &TextContext<B>| TextContext { layers: t.layers.iter().map(|l| move_layer(l, device)).collect() };
        Self {
            planner: self.planner.clone().to_device(device),
            renderer: self.renderer.clone().to_device(device),
            planner_text: text(&self.planner_text),
            renderer_text: text(&self.renderer_text),
            noise: self.noise,
            sigmas: self.sigmas.clone(),
            device: device.clone(),
        }
    }
}

fn move_layer<B: Backend>(l: &LayerKv<B>, device: &B::Device) -> LayerKv<B> {
    LayerKv { k: l.k.clone().to_device(device), v: l.v.clone().to_device(device) }
}

/// Splits a block's K/V into one entry per latent frame.
fn split_frames<B: Backend>(kv: ChunkKv<B>, frames: usize) -> Vec<ChunkKv<B>> {
    let t = kv.tokens() / frames;
    (0..frames)
        .map(|f| ChunkKv {
            layers: kv.layers.iter().map(|l| LayerKv { k: l.k.clone().narrow(2, f * t, t), v: l.v.clone().narrow(2, f * t, t) }).collect(),
        })
        .collect()
}

impl<B: Backend> Runner for DitRunner<B> {
    type Latent = Tensor<B, 5>;
    type Kv = ChunkKv<B>;

    fn run(&mut self, node: &Node, source: Option<&Tensor<B, 5>>, reads: &[&ChunkKv<B>]) -> Result<(Tensor<B, 5>, Vec<ChunkKv<B>>)> {
        let planner = node.kind.is_planner();
        let stream = if planner { PLANNER_STREAM } else { OUTPUT_STREAM };
        let sigma = self.sigmas[node.level];
        let clean = node.level + 1 == self.sigmas.len();
        let eps = || self.noise.sample::<B>(stream, &node.positions, node.level, &self.device);
        let x = match source {
            None => eps(),
            Some(x0) if clean => x0.clone(),
            Some(x0) => FlowMatch::noise(x0.clone(), eps(), sigma),
        };
        let (model, text) = if planner { (&self.planner, &self.planner_text) } else { (&self.renderer, &self.renderer_text) };
        let layout = FrameLayout::frames(node.positions.clone(), Role::Base);
        let ctx = SegmentContext::new(reads.to_vec());
        let out = model
            .forward_chunk(x.clone(), std::slice::from_ref(&node.timesteps), &layout, text, &ctx)
            .map_err(|source| SchedError::Model { node: node.id, source })?;
        let x0 = FlowMatch::x0_from_v(x, out.prediction, sigma);
        let kvs = match node.publishes.first() {
            None => vec![],
            Some(KvKey::Anchor(_)) => split_frames(out.kv, node.positions.len()),
            Some(KvKey::Chunk { .. }) => vec![out.kv],
        };
        Ok((x0, kvs))
    }

    fn adopt_latent(&self, latent: Tensor<B, 5>) -> Tensor<B, 5> {
        latent.to_device(&self.device)
    }

    fn adopt_kv(&self, kv: ChunkKv<B>) -> ChunkKv<B> {
        ChunkKv { layers: kv.layers.iter().map(|l| move_layer(l, &self.device)).collect() }
    }
}
