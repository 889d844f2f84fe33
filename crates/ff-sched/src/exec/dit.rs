//! [`DitRunner`]: runs graph nodes with the Wan DiT (`WanDit::forward_chunk`).
//!
//! Input of a node at level `l` with σ = σ_l: pure noise ε (no source), `(1 − σ)·x0 + σ·ε` with
//! fresh ε from the counter-based stream (a source and `l < S`), or the clean x0 (`l = S`, t = 0).
//! Output: `x0 = x − σ·v` from the velocity prediction; the final stage's x0 is the video.
//! Under the contract's Euler planner sampler, planner nodes take their source's latent as is and
//! output it advanced one Euler step, `x + (σ_{l+1} − σ_l)·v`; a guided step runs the conditional
//! and the empty prompt as one batch of two and steps along `v_∅ + g·(v_c − v_∅)`
//! ([`DitRunner::with_empty_prompt`] gives the empty prompt).
//! Planner nodes run the planner model, all other nodes the renderer model; a model with roles is
//! merged into one full-weight model per role (as the paper serves them), a plain model serves
//! both as one copy. A runner moved to a device keeps only the roles its workers run there
//! ([`Roles::of_workers`]). Published K/V: the chunk's entry, or one entry per anchor frame for
//! planner blocks. A node reads its entries through the runner's in-place K/V windows
//! ([`window`]), never a per-layer concatenation. A batch of independent nodes runs as one
//! `forward_chunks` call, one batch element per node, each attending through its own window.

mod window;

use super::Placement;
use super::batch::BatchContext;
use super::noise::{NoiseSpec, OUTPUT_STREAM, PLANNER_STREAM};
use super::{NodeResult, Runner};
use crate::bank::Entry;
use crate::contract::Contract;
use crate::error::{Result, SchedError};
use crate::schedule::{Graph, KvKey, Node, NodeKind};
use burn::module::{Module, ModuleVisitor, Param};
use burn::tensor::Tensor;
use ff_model::AttentionBackend;
use ff_model::FlowMatch;
use ff_model::dit::{ChunkKv, FrameLayout, LayerKv, Role, Shard, ShardReads, TextContext, ThreadGather, WanDit, shard_frames};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use window::{WindowKey, Windows};

use super::prompts::Prompts;

impl<B: AttentionBackend> Entry for ChunkKv<B> {
    fn bytes(&self) -> usize {
        ChunkKv::bytes(self)
    }
}

/// Which roles the nodes of some workers run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Roles {
    /// Some node is a planner forward.
    pub planner: bool,
    /// Some node is a renderer (or baseline) forward.
    pub renderer: bool,
}

impl Roles {
    /// The roles of the nodes `placement` puts on any of `workers`.
    pub fn of_workers(graph: &Graph, placement: &Placement, workers: &[usize]) -> Self {
        let mut roles = Self::default();
        for n in graph.nodes.iter().filter(|n| workers.iter().any(|w| placement.workers_of(n).contains(w))) {
            let planner = n.kind.is_planner();
            roles.planner |= planner;
            roles.renderer |= !planner;
        }
        roles
    }
}

/// A role's model and the cross-attention K/V of each prompt under it (and, for guided planner
/// steps, the prompt's and the empty prompt's as a batch of two), made when a node first needs
/// them.
#[derive(Clone)]
struct RoleModel<B: AttentionBackend> {
    model: WanDit<B>,
    texts: HashMap<usize, TextContext<B>>,
    guided: HashMap<usize, TextContext<B>>,
}

impl<B: AttentionBackend> RoleModel<B> {
    fn new(model: WanDit<B>) -> Self {
        Self { model, texts: HashMap::new(), guided: HashMap::new() }
    }

    fn to_device(&self, device: &B::Device) -> Self {
        Self::new(self.model.clone().to_device(device))
    }
}

/// One worker's models, prompt context and noise stream.
#[derive(Clone)]
pub struct DitRunner<B: AttentionBackend> {
    /// The models of planner nodes and of the other nodes; `None` where this runner does not run
    /// the role. A plain model is one copy in both (clones share its tensors).
    planner: Option<RoleModel<B>>,
    renderer: Option<RoleModel<B>>,
    /// Whether both roles are one model.
    shared: bool,
    noise: NoiseSpec,
    /// σ of every level `0..=S`.
    sigmas: Vec<f64>,
    /// σ of every planner level (`0..=planner_steps` under the Euler sampler, else `sigmas`).
    planner_sigmas: Vec<f64>,
    /// The contract's planner sampler: Euler steps, and their guidance scale when guided.
    planner_euler: bool,
    planner_guidance: Option<f64>,
    /// The prompts and where each applies; the empty prompt of guided planner steps.
    prompts: Prompts<B>,
    empty: Option<Tensor<B, 3>>,
    windows: Windows<B>,
    device: B::Device,
    /// This runner's endpoint when it computes a shard of every planner forward.
    shard: Option<Arc<Mutex<ThreadGather<B>>>>,
}

impl<B: AttentionBackend> DitRunner<B> {
    /// Runner for `model` with prompt embeddings `text` (`[1, text_tokens, text_dim]`), running
    /// both roles.
    pub fn new(model: &WanDit<B>, text: Tensor<B, 3>, contract: &Contract, noise: NoiseSpec) -> Self {
        match model.role_embedding {
            Some(_) => Self::from_role_models(model.merge(Role::Planner), model.merge(Role::Renderer), text, contract, noise),
            None => {
                let one = RoleModel::new(model.clone());
                Self::with_models(one.clone(), one, true, Prompts::single("", text), contract, noise)
            }
        }
    }

    /// Runner for a student served as two plain models (its roles merged ahead of time, e.g. an
    /// exported student), running both roles.
    pub fn from_role_models(planner: WanDit<B>, renderer: WanDit<B>, text: Tensor<B, 3>, contract: &Contract, noise: NoiseSpec) -> Self {
        Self::with_models(RoleModel::new(planner), RoleModel::new(renderer), false, Prompts::single("", text), contract, noise)
    }

    fn with_models(
        planner: RoleModel<B>,
        renderer: RoleModel<B>,
        shared: bool,
        prompts: Prompts<B>,
        contract: &Contract,
        noise: NoiseSpec,
    ) -> Self {
        let (config, device) = (renderer.model.config().clone(), renderer.model.device());
        Self {
            planner: Some(planner),
            renderer: Some(renderer),
            shared,
            noise,
            sigmas: (0..=contract.stages()).map(|l| contract.sigma(l)).collect(),
            planner_sigmas: (0..=contract.planner_levels()).map(|l| contract.planner_sigma(l)).collect(),
            planner_euler: contract.planner_euler(),
            planner_guidance: contract.planner_guided().then_some(contract.config.planner_guidance),
            prompts,
            empty: None,
            windows: Windows::new(contract, &config, noise.height, noise.width, &device),
            device,
            shard: None,
        }
    }

    /// This runner computing shard `end.index()` of every planner forward, exchanging K/V with
    /// the other runners of `end`'s group (one per stage worker of a
    /// [`Placement::context_parallel`], each on its device; `ThreadGather::group`).
    pub fn with_planner_shard(mut self, end: ThreadGather<B>) -> Self {
        self.shard = Some(Arc::new(Mutex::new(end)));
        self
    }

    /// This runner with the empty prompt's embeddings (`[1, text_tokens, text_dim]`), which guided
    /// planner steps contrast with the prompt.
    pub fn with_empty_prompt(self, empty: Tensor<B, 3>) -> Self {
        Self { empty: Some(empty), ..self }
    }

    /// This runner reading its prompts from `prompts` (shared by every worker of the run; see
    /// [`Prompts`]) instead of the one prompt it was made with.
    pub fn with_prompts(self, prompts: Prompts<B>) -> Self {
        Self { prompts, ..self }
    }

    /// This runner keeping the models of `roles` only (no copy: the kept models are shared).
    pub fn for_roles(&self, roles: Roles) -> Self {
        Self {
            planner: self.planner.clone().filter(|_| roles.planner),
            renderer: self.renderer.clone().filter(|_| roles.renderer),
            ..self.clone()
        }
    }

    /// A copy of this runner on `device`: one copy per role it holds, one in all when the roles
    /// are one model. Workers on one device share one such copy (clone it).
    pub fn to_device(&self, device: &B::Device) -> Self {
        let (planner, renderer) = match (self.shared, self.planner.as_ref().or(self.renderer.as_ref())) {
            (true, Some(one)) => {
                let one = one.to_device(device);
                (self.planner.as_ref().map(|_| one.clone()), self.renderer.as_ref().map(|_| one))
            }
            _ => (self.planner.as_ref().map(|m| m.to_device(device)), self.renderer.as_ref().map(|m| m.to_device(device))),
        };
        Self {
            planner,
            renderer,
            shared: self.shared,
            noise: self.noise,
            sigmas: self.sigmas.clone(),
            planner_sigmas: self.planner_sigmas.clone(),
            planner_euler: self.planner_euler,
            planner_guidance: self.planner_guidance,
            prompts: self.prompts.clone(),
            empty: self.empty.as_ref().map(|e| e.clone().to_device(device)),
            windows: self.windows.to_device(device),
            device: device.clone(),
            shard: self.shard.clone(),
        }
    }

    /// Bytes of the distinct model weights this runner holds (a shared copy counts once).
    pub fn weight_bytes(&self) -> usize {
        let bytes = |m: &Option<RoleModel<B>>| m.as_ref().map_or(0, |m| param_bytes(&m.model));
        match self.shared {
            true => bytes(&self.planner).max(bytes(&self.renderer)),
            false => bytes(&self.planner) + bytes(&self.renderer),
        }
    }

    /// Whether `node` is a planner node under the Euler sampler.
    fn euler(&self, node: &Node) -> bool {
        self.planner_euler && node.kind.is_planner()
    }

    /// σ of `node`'s level on its role's table, and whether the level is the clean endpoint.
    fn sigma(&self, node: &Node) -> (f64, bool) {
        let table = if node.kind.is_planner() { &self.planner_sigmas } else { &self.sigmas };
        (table[node.level], node.level + 1 == table.len())
    }

    /// The input latent of `node` at its level.
    fn input(&self, node: &Node, source: Option<&Tensor<B, 5>>) -> Tensor<B, 5> {
        let stream = if node.kind.is_planner() { PLANNER_STREAM } else { OUTPUT_STREAM };
        let eps = || self.noise.sample::<B>(stream, &node.positions, node.level, &self.device);
        match source {
            None => eps(),
            Some(x) if self.euler(node) => x.clone(),
            Some(x0) => match self.sigma(node) {
                (_, true) => x0.clone(),
                (sigma, false) => FlowMatch::noise(x0.clone(), eps(), sigma),
            },
        }
    }

    fn model(&self, node: &Node) -> Result<&RoleModel<B>> {
        let (held, role) = if node.kind.is_planner() { (&self.planner, "planner") } else { (&self.renderer, "renderer") };
        held.as_ref().ok_or_else(|| Self::missing(node, role))
    }

    fn missing(node: &Node, role: &str) -> SchedError {
        SchedError::Worker {
            worker: 0,
            reason: format!("node {} needs the {role} model, which this runner was not given (see Roles::of_workers)", node.id),
        }
    }

    /// The text context of prompt `prompt` under `node`'s model: the prompt's, or for a guided
    /// step the prompt's and the empty prompt's as a batch of two. Made on first use.
    fn prompt_text(&mut self, node: &Node, prompt: usize, guided: bool) -> Result<TextContext<B>> {
        let planner = node.kind.is_planner();
        let held = if planner { self.planner.as_mut() } else { self.renderer.as_mut() };
        let m = held.ok_or_else(|| Self::missing(node, if planner { "planner" } else { "renderer" }))?;
        if !m.texts.contains_key(&prompt) {
            let text = self.prompts.text(prompt)?.to_device(&self.device);
            m.texts.insert(prompt, m.model.text_context(text));
        }
        if !guided {
            return Ok(m.texts[&prompt].clone());
        }
        if !m.guided.contains_key(&prompt) {
            let empty = self.empty.clone().ok_or_else(|| SchedError::Worker {
                worker: 0,
                reason: format!(
                    "node {} is a guided planner step and the runner has no empty prompt (see DitRunner::with_empty_prompt)",
                    node.id
                ),
            })?;
            let empty = m.model.text_context(empty);
            let pairs = m.texts[&prompt].layers.iter().zip(empty.layers).map(|(c, e)| LayerKv::stack(vec![c.clone(), e]));
            m.guided.insert(prompt, TextContext { layers: pairs.collect() });
        }
        Ok(m.guided[&prompt].clone())
    }

    /// The text context of `nodes` (one model), one batch element per node, each under its
    /// prompt in `prompts`; for a guided step the prompt's and the empty prompt's for each
    /// node in turn (`2n` elements). Returns the guidance scale if guided.
    fn text(&mut self, nodes: &[&Node], prompts: &[usize]) -> Result<(TextContext<B>, Option<f64>)> {
        let guidance = self.planner_guidance.filter(|_| nodes[0].passes == 2);
        let texts = nodes.iter().zip(prompts).map(|(n, &p)| self.prompt_text(n, p, guidance.is_some())).collect::<Result<Vec<_>>>()?;
        let one = prompts.iter().all(|&p| p == prompts[0]);
        let repeat = |l: &LayerKv<B>| LayerKv { k: l.k.clone().repeat_dim(0, nodes.len()), v: l.v.clone().repeat_dim(0, nodes.len()) };
        let text = match (one, guidance) {
            // One prompt, unguided: a batch of one broadcasts over the nodes.
            (true, None) => texts[0].clone(),
            (true, Some(_)) if nodes.len() == 1 => texts[0].clone(),
            (true, Some(_)) => TextContext { layers: texts[0].layers.iter().map(repeat).collect() },
            (false, _) => {
                let layers = (0..texts[0].layers.len()).map(|l| LayerKv::stack(texts.iter().map(|t| t.layers[l].clone()).collect()));
                TextContext { layers: layers.collect() }
            }
        };
        Ok((text, guidance))
    }

    /// x0 from the velocity (or the next Euler latent of a planner step), and the entries to
    /// publish (one per anchor frame for planner blocks).
    fn finish(&self, node: &Node, x: Tensor<B, 5>, v: Tensor<B, 5>, kv: ChunkKv<B>) -> NodeResult<Self> {
        let x0 = match (self.euler(node), node.kind) {
            (true, NodeKind::PlannerDenoise) => {
                let (from, to) = (self.planner_sigmas[node.level], self.planner_sigmas[node.level + 1]);
                x + v * (to - from)
            }
            _ => FlowMatch::x0_from_v(x, v, self.sigma(node).0),
        };
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

/// Bytes of every parameter tensor of `model`.
fn param_bytes<B: AttentionBackend>(model: &WanDit<B>) -> usize {
    struct Bytes(usize);
    impl<B: AttentionBackend> ModuleVisitor<B> for Bytes {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
            let t = param.val();
            self.0 += t.shape().num_elements() * t.dtype().size();
        }
    }
    let mut v = Bytes(0);
    model.visit(&mut v);
    v.0
}

impl<B: AttentionBackend> DitRunner<B> {
    /// `node`'s reads in the version of its prompt `p`, or dropped (see `Prompts`).
    fn pick_reads(&self, node: &Node, reads: &[&ChunkKv<B>], p: usize) -> Vec<(KvKey, ChunkKv<B>, usize)> {
        let pick = |(k, e): (&KvKey, &&ChunkKv<B>)| match self.prompts.versions(k) {
            _ if self.prompts.drops(k, p) => None,
            None => Some((*k, (*e).clone(), 0)),
            Some(_) => {
                let v = self.prompts.version_for(k, p);
                Some((*k, e.batch_element(v), v))
            }
        };
        node.reads.iter().zip(reads).filter_map(pick).collect()
    }

    /// The re-cached versions of what `node` publishes (input `x`, reads `reads`), each its own
    /// whole forward, run before the node's own so that the window's target slots end holding
    /// the node's own K/V.
    fn recached(&mut self, node: &Node, reads: &[(KvKey, ChunkKv<B>, usize)], x: &Tensor<B, 5>) -> Result<Vec<ChunkKv<B>>> {
        let others: Vec<usize> = node.publishes.first().and_then(|k| self.prompts.versions(k)).map_or(vec![], |v| v[1..].to_vec());
        let mut kvs = Vec::with_capacity(others.len());
        for p in others {
            let key = self.windows.prepare(node, reads)?;
            let text = self.prompt_text(node, p, false)?;
            kvs.push(self.forward(&[node], &[key], std::slice::from_ref(x), &text, 1)?.kv);
        }
        Ok(kvs)
    }

    /// `nodes` (one model, equal frame counts, distinct windows) as one `forward_chunks` call
    /// (a single node too, so that every executor runs the same attention calls).
    fn forward_batch(
        &mut self,
        nodes: &[&Node],
        sources: &[Option<&Tensor<B, 5>>],
        reads: &[Vec<&ChunkKv<B>>],
    ) -> Result<Vec<NodeResult<Self>>> {
        let prompts = nodes.iter().map(|n| self.prompts.begin(n)).collect::<Result<Vec<usize>>>()?;
        let inputs: Vec<Tensor<B, 5>> = nodes.iter().zip(sources).map(|(n, s)| self.input(n, *s)).collect();
        let reads: Vec<Vec<(KvKey, ChunkKv<B>, usize)>> =
            nodes.iter().zip(reads).zip(&prompts).map(|((n, r), &p)| self.pick_reads(n, r, p)).collect();
        let versions = nodes.iter().zip(&reads).zip(&inputs).map(|((n, r), x)| self.recached(n, r, x)).collect::<Result<Vec<_>>>()?;
        let keys = nodes.iter().zip(&reads).map(|(n, r)| self.windows.prepare(n, r)).collect::<Result<Vec<_>>>()?;
        let (text, guidance) = self.text(nodes, &prompts)?;
        // A guided step's batch runs each node twice in a row (its window, layout, timesteps and
        // input): element 2i under the prompt, 2i + 1 under the empty prompt.
        let passes = if guidance.is_some() { 2 } else { 1 };
        let out = self.forward(nodes, &keys, &inputs, &text, passes)?;
        let velocity = |b: usize| {
            let v = |e: usize| out.prediction.clone().narrow(0, e, 1);
            match guidance {
                Some(g) => ff_model::flow::cfg(v(2 * b + 1), v(2 * b), g),
                None => v(b),
            }
        };
        for (node, key) in nodes.iter().zip(&keys) {
            if let Some(k) = key {
                self.windows.published(node, *k)?;
            }
        }
        Ok(nodes
            .iter()
            .zip(inputs)
            .zip(versions)
            .enumerate()
            .map(|(b, ((node, x), others))| self.finish(node, x, velocity(b), with_versions(out.kv.batch_element(b * passes), &others)))
            .collect())
    }

    /// One `forward_chunks` call of `nodes` (one model) through their windows `keys`, each node
    /// `passes` times in a row, under `text`.
    fn forward(
        &self,
        nodes: &[&Node],
        keys: &[Option<WindowKey>],
        inputs: &[Tensor<B, 5>],
        text: &TextContext<B>,
        passes: usize,
    ) -> Result<ff_model::dit::ChunkOutput<B>> {
        let n = nodes.len();
        let node_of = |b: usize| b / passes;
        let ctx = BatchContext::new((0..n * passes).map(|b| keys[node_of(b)].map(|k| self.windows.window(k))).collect());
        let layouts: Vec<FrameLayout> =
            (0..n * passes).map(|b| FrameLayout::frames(nodes[node_of(b)].positions.clone(), Role::Base)).collect();
        let timesteps: Vec<Vec<f64>> = (0..n * passes).map(|b| nodes[node_of(b)].timesteps.clone()).collect();
        let batch = Tensor::cat((0..n * passes).map(|b| inputs[node_of(b)].clone()).collect(), 0);
        let first = nodes[0].id;
        self.model(nodes[0])?
            .model
            .forward_chunks(batch, &timesteps, &layouts, text, &ctx)
            .map_err(|source| SchedError::Model { node: first, source })
    }
}

impl<B: AttentionBackend> DitRunner<B> {
    /// This runner's shard of planner `node` (see `ff_model::dit::parallel`): the input latent
    /// is drawn whole (noise is per frame position, so every shard draws the same), the shard's
    /// frames run through the model with the K/V all-gathered per layer, and the predictions are
    /// gathered, so every shard ends with the whole x0 and K/V. A shard with no frames (fewer
    /// anchors than devices) only receives.
    fn forward_shard(
        &mut self,
        node: &Node,
        source: Option<&Tensor<B, 5>>,
        reads: &[&ChunkKv<B>],
        end: &ThreadGather<B>,
    ) -> Result<NodeResult<Self>> {
        let model_err = |source| SchedError::Model { node: node.id, source };
        let frames = shard_frames(node.positions.len(), end.devices());
        end.set_active(frames.len());
        let prompt = self.prompts.begin(node)?;
        let x = self.input(node, source);
        let [_, _, _, h, w] = x.dims();
        let reads = self.pick_reads(node, reads, prompt);
        // Re-cached versions run whole on every shard (each shard publishes the whole K/V).
        let others = self.recached(node, &reads, &x)?;
        let (text, guidance) = self.text(&[node], &[prompt])?;
        let passes = if guidance.is_some() { 2 } else { 1 };
        let layers = self.model(node)?.model.config().num_layers;
        let (prediction, kv) = match frames.get(end.index()).cloned() {
            Some(mine) => {
                let key = self.windows.prepare(node, &reads)?;
                let ctx = BatchContext::new((0..passes).map(|_| key.map(|k| self.windows.window(k))).collect());
                let layout = FrameLayout::frames(node.positions.clone(), Role::Base);
                let timesteps = vec![node.timesteps[mine.clone()].to_vec(); passes];
                let part = x.clone().narrow(2, mine.start, mine.len());
                let batch = Tensor::cat(vec![part; passes], 0);
                let shard = Shard { frames: mine, exchange: end };
                let reads = ShardReads::Context(&ctx);
                let out = self.model(node)?.model.forward_shard(&shard, batch, &timesteps, &layout, &text, reads).map_err(model_err)?;
                if let Some(k) = key {
                    self.windows.published(node, k)?;
                }
                (end.gather_frames(layers, Some(out.prediction), [h, w]).map_err(model_err)?, out.kv)
            }
            None => {
                let kv = (0..layers).map(|l| end.receive(l)).collect::<ff_model::Result<Vec<_>>>().map_err(model_err)?;
                (end.gather_frames(layers, None, [h, w]).map_err(model_err)?, ChunkKv { layers: kv })
            }
        };
        let v = |e: usize| prediction.clone().narrow(0, e, 1);
        let velocity = match guidance {
            Some(g) => ff_model::flow::cfg(v(1), v(0), g),
            None => v(0),
        };
        Ok(self.finish(node, x, velocity, with_versions(kv.batch_element(0), &others)))
    }
}

/// A node's own published K/V and its re-cached versions as one entry, one batch element per
/// prompt, its own first (`Prompts::versions`).
fn with_versions<B: AttentionBackend>(own: ChunkKv<B>, others: &[ChunkKv<B>]) -> ChunkKv<B> {
    match others.is_empty() {
        true => own,
        false => ChunkKv::stack(&std::iter::once(&own).chain(others).collect::<Vec<_>>()),
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
        let _span = tracing::trace_span!("forward", node = node.id, kind = ?node.kind, level = node.level).entered();
        match self.shard.clone().filter(|_| node.kind.is_planner()) {
            Some(end) => self.forward_shard(node, source, reads, &end.lock().expect("shard endpoint lock")),
            None => Ok(self.forward_batch(&[node], &[source], &[reads.to_vec()])?.remove(0)),
        }
    }

    fn planner_shard(&self) -> Option<(usize, usize)> {
        self.shard.as_ref().map(|end| {
            let end = end.lock().expect("shard endpoint lock");
            (end.index(), end.devices())
        })
    }

    /// One batched forward (`forward_chunks`, one batch element per node, see
    /// `BatchContext`); a single node runs as [`Runner::run`]. Nodes sharing a window (never
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
