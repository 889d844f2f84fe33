//! [`DitRunner`]: runs graph nodes with the Wan DiT (`WanDit::forward_chunk`).
//!
//! Input of a node at level `l` with σ = σ_l: pure noise ε (no source), `(1 − σ)·x0 + σ·ε` with
//! fresh ε from the counter-based stream (a source and `l < S`), or the clean x0 (`l = S`, t = 0).
//! Output: `x0 = x − σ·v` from the velocity prediction; the final stage's x0 is the video.
//! Planner nodes run the planner model, all other nodes the renderer model; a model with roles is
//! merged into one full-weight model per role (as the paper serves them), a plain model serves
//! both. Published K/V: the chunk's entry, or one entry per anchor frame for planner blocks.
//! A node reads its entries through the runner's in-place K/V windows ([`window`]), never a
//! per-layer concatenation. A batch of independent nodes runs as one `forward_chunks` call, one
//! batch element per node, each attending through its own window.

mod window;

use super::batch::BatchContext;
use super::noise::{NoiseSpec, OUTPUT_STREAM, PLANNER_STREAM};
use super::{NodeResult, Runner};
use crate::bank::Entry;
use crate::contract::Contract;
use crate::error::{Result, SchedError};
use crate::schedule::{KvKey, Node};
use burn::module::Module;
use burn::tensor::Tensor;
use ff_model::AttentionBackend;
use ff_model::FlowMatch;
use ff_model::dit::{ChunkKv, FrameLayout, LayerKv, Role, TextContext, WanDit};
use window::{WindowKey, Windows};

impl<B: AttentionBackend> Entry for ChunkKv<B> {
    fn bytes(&self) -> usize {
        ChunkKv::bytes(self)
    }
}

/// One worker's models, prompt context and noise stream.
#[derive(Clone)]
pub struct DitRunner<B: AttentionBackend> {
    planner: WanDit<B>,
    renderer: WanDit<B>,
    planner_text: TextContext<B>,
    renderer_text: TextContext<B>,
    noise: NoiseSpec,
    /// σ of every level `0..=S`.
    sigmas: Vec<f64>,
    windows: Windows<B>,
    device: B::Device,
}

impl<B: AttentionBackend> DitRunner<B> {
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
            windows: Windows::new(contract, model.config(), noise.height, noise.width, &model.device()),
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
            windows: self.windows.to_device(device),
            device: device.clone(),
        }
    }

    /// The input latent of `node` at its level.
    fn input(&self, node: &Node, source: Option<&Tensor<B, 5>>) -> Tensor<B, 5> {
        let stream = if node.kind.is_planner() { PLANNER_STREAM } else { OUTPUT_STREAM };
        let eps = || self.noise.sample::<B>(stream, &node.positions, node.level, &self.device);
        match source {
            None => eps(),
            Some(x0) if node.level + 1 == self.sigmas.len() => x0.clone(),
            Some(x0) => FlowMatch::noise(x0.clone(), eps(), self.sigmas[node.level]),
        }
    }

    fn model(&self, node: &Node) -> (&WanDit<B>, &TextContext<B>) {
        if node.kind.is_planner() { (&self.planner, &self.planner_text) } else { (&self.renderer, &self.renderer_text) }
    }

    /// x0 from the velocity, and the entries to publish (one per anchor frame for planner blocks).
    fn finish(&self, node: &Node, x: Tensor<B, 5>, v: Tensor<B, 5>, kv: ChunkKv<B>) -> NodeResult<Self> {
        let x0 = FlowMatch::x0_from_v(x, v, self.sigmas[node.level]);
        let kvs = match node.publishes.first() {
            None => vec![],
            Some(KvKey::Anchor(_)) => {
                let t = kv.tokens() / node.positions.len();
                (0..node.positions.len()).map(|f| narrow_kv(&kv, f * t, t)).collect()
            }
            Some(KvKey::Chunk { .. }) => vec![kv],
        };
        (x0, kvs)
    }
}

impl<B: AttentionBackend> DitRunner<B> {
    /// `nodes` (one model, equal frame counts, distinct windows) as one `forward_chunks` call
    /// (a single node too, so that every executor runs the same attention calls).
    fn forward_batch(
        &mut self,
        nodes: &[&Node],
        sources: &[Option<&Tensor<B, 5>>],
        reads: &[Vec<&ChunkKv<B>>],
    ) -> Result<Vec<NodeResult<Self>>> {
        let inputs: Vec<Tensor<B, 5>> = nodes.iter().zip(sources).map(|(n, s)| self.input(n, *s)).collect();
        let keys = nodes.iter().zip(reads).map(|(n, r)| self.windows.prepare(n, r)).collect::<Result<Vec<_>>>()?;
        let (model, text) = self.model(nodes[0]);
        let ctx = BatchContext::new(keys.iter().map(|k| k.map(|k| self.windows.window(k))).collect());
        let layouts: Vec<FrameLayout> = nodes.iter().map(|n| FrameLayout::frames(n.positions.clone(), Role::Base)).collect();
        let timesteps: Vec<Vec<f64>> = nodes.iter().map(|n| n.timesteps.clone()).collect();
        let first = nodes[0].id;
        let out = model
            .forward_chunks(Tensor::cat(inputs.clone(), 0), &timesteps, &layouts, text, &ctx)
            .map_err(|source| SchedError::Model { node: first, source })?;
        for (node, key) in nodes.iter().zip(&keys) {
            if let Some(k) = key {
                self.windows.published(node, *k)?;
            }
        }
        Ok(nodes
            .iter()
            .zip(inputs)
            .enumerate()
            .map(|(b, (node, x))| self.finish(node, x, out.prediction.clone().narrow(0, b, 1), out.kv.batch_element(b)))
            .collect())
    }
}

/// Tokens `start..start + len` of every layer.
fn narrow_kv<B: AttentionBackend>(kv: &ChunkKv<B>, start: usize, len: usize) -> ChunkKv<B> {
    ChunkKv {
        layers: kv.layers.iter().map(|l| LayerKv { k: l.k.clone().narrow(2, start, len), v: l.v.clone().narrow(2, start, len) }).collect(),
    }
}

fn move_layer<B: AttentionBackend>(l: &LayerKv<B>, device: &B::Device) -> LayerKv<B> {
    LayerKv { k: l.k.clone().to_device(device), v: l.v.clone().to_device(device) }
}

impl<B: AttentionBackend> Runner for DitRunner<B> {
    type Latent = Tensor<B, 5>;
    type Kv = ChunkKv<B>;

    fn run(&mut self, node: &Node, source: Option<&Tensor<B, 5>>, reads: &[&ChunkKv<B>]) -> Result<(Tensor<B, 5>, Vec<ChunkKv<B>>)> {
        Ok(self.forward_batch(&[node], &[source], &[reads.to_vec()])?.remove(0))
    }

    /// One batched forward (`forward_chunks`, one batch element per node, see
    /// [`BatchContext`]); a single node runs as [`Runner::run`]. Nodes sharing a window (never
    /// the nodes of one wave of the built schedules) go to separate forwards.
    fn run_batch(
        &mut self,
        nodes: &[&Node],
        sources: &[Option<&Tensor<B, 5>>],
        reads: &[Vec<&ChunkKv<B>>],
    ) -> Result<Vec<NodeResult<Self>>> {
        if let ([node], [source], [reads]) = (nodes, sources, reads) {
            return Ok(vec![self.run(node, *source, reads)?]);
        }
        let first = nodes.first().map_or(0, |n| n.id);
        let frames = nodes.first().map_or(0, |n| n.positions.len());
        if nodes.iter().any(|n| n.kind.is_planner() != nodes[0].kind.is_planner() || n.positions.len() != frames) {
            return Err(SchedError::Worker { worker: 0, reason: format!("batch at node {first} mixes models or frame counts") });
        }
        let mut results = Vec::with_capacity(nodes.len());
        let mut start = 0;
        while start < nodes.len() {
            let mut used: Vec<WindowKey> = Vec::new();
            let mut end = start;
            for n in &nodes[start..] {
                let key = (!n.reads.is_empty()).then(|| WindowKey::of(n));
                if key.is_some_and(|k| used.contains(&k)) {
                    break;
                }
                used.extend(key);
                end += 1;
            }
            results.extend(self.forward_batch(&nodes[start..end], &sources[start..end], &reads[start..end])?);
            start = end;
        }
        Ok(results)
    }

    fn adopt_latent(&self, latent: Tensor<B, 5>) -> Tensor<B, 5> {
        latent.to_device(&self.device)
    }

    fn adopt_kv(&self, kv: ChunkKv<B>) -> ChunkKv<B> {
        ChunkKv { layers: kv.layers.iter().map(|l| move_layer(l, &self.device)).collect() }
    }
}
