//! The runner's in-place K/V windows ([`KvWindow`]): no forward concatenates its context.
//!
//! A node that reads entries attends through a window of its model and bank (FlashForward: one
//! per stage; the baselines' single bank: one; the planner: one). Slots are latent frames; each
//! key has a **canonical slot**, a function of the key and the contract only: anchor `a` at
//! `a mod A` (A = the anchors a forward of that model reads or writes at most), chunk `c` at
//! `A + (c mod R)·B_R` in a ring of `R = 1 + max history` chunks, and a node's own K/V at the
//! slot of its chunk or of its block's first anchor. Every runner therefore lays a node's keys out
//! in the same order, so all executors stay bit-identical. An entry is copied into its slot only
//! when the window does not already hold it; a forward writes its own K/V into its target slots
//! during the forward, and what it publishes stays there for the next reader on this worker.
//! Nodes that read nothing attend to their own K/V without a window.

use crate::contract::Contract;
use crate::error::{Result, SchedError};
use crate::schedule::{KvKey, Node, Unit};
use burn::tensor::backend::Backend;
use ff_model::dit::{ChunkKv, DitConfig, KvWindow};
use std::collections::HashMap;
use std::ops::Range;

/// Which window a node uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum WindowKey {
    Planner,
    /// A renderer reading or publishing history bank `b`.
    Bank(usize),
    /// A renderer that touches no bank (e.g. anchors only): one window per stage.
    Stage(usize),
}

impl WindowKey {
    pub fn of(node: &Node) -> Self {
        let bank = node.reads.iter().chain(&node.publishes).find_map(|k| match k {
            KvKey::Chunk { bank, .. } => Some(*bank),
            KvKey::Anchor(_) => None,
        });
        match (node.kind.is_planner(), bank) {
            (true, _) => Self::Planner,
            (false, Some(b)) => Self::Bank(b),
            (false, None) => Self::Stage(node.stage),
        }
    }
}

/// Sizes of every window of one run, fixed by the contract and the model.
#[derive(Clone, Debug)]
struct Layout {
    planner_anchors: usize,
    renderer_anchors: usize,
    /// History ring in chunks, chunk size in frames.
    ring: usize,
    chunk: usize,
    /// First anchor index of each planner block.
    block_starts: Vec<usize>,
    layers: usize,
    heads: usize,
    head_dim: usize,
    tokens_per_frame: usize,
}

impl Layout {
    fn anchors(&self, key: WindowKey) -> usize {
        if key == WindowKey::Planner { self.planner_anchors } else { self.renderer_anchors }
    }

    fn slots(&self, key: WindowKey) -> usize {
        self.anchors(key) + if key == WindowKey::Planner { 0 } else { self.ring * self.chunk }
    }

    fn slot_of(&self, key: WindowKey, kv: &KvKey) -> usize {
        match kv {
            KvKey::Anchor(a) => a % self.anchors(key),
            KvKey::Chunk { chunk, .. } => self.anchors(key) + (chunk % self.ring) * self.chunk,
        }
    }

    fn target(&self, key: WindowKey, node: &Node) -> Result<usize> {
        match node.unit {
            Unit::Chunk(i) if key != WindowKey::Planner => Ok(self.anchors(key) + (i % self.ring) * self.chunk),
            Unit::Block(j) if key == WindowKey::Planner => Ok(self.block_starts[j] % self.anchors(key)),
            _ => Err(SchedError::Graph(format!("node {}: {:?} reads K/V but has no window slot", node.id, node.unit))),
        }
    }
}

/// One window and the key (and version, see `Prompts`) whose frame each slot holds.
struct Held<B: Backend> {
    window: KvWindow<B>,
    held: Vec<Option<(KvKey, usize)>>,
}

/// The windows of one runner, created on first use. A clone starts without windows (each worker
/// fills its own).
pub(crate) struct Windows<B: Backend> {
    layout: Layout,
    device: B::Device,
    windows: HashMap<WindowKey, Held<B>>,
}

impl<B: Backend> Clone for Windows<B> {
    fn clone(&self) -> Self {
        Self { layout: self.layout.clone(), device: self.device.clone(), windows: HashMap::new() }
    }
}

impl<B: Backend> Windows<B> {
    /// Windows for `contract`'s nodes on a model of `config` with latents of `height × width`.
    pub fn new(contract: &Contract, config: &DitConfig, height: usize, width: usize, device: &B::Device) -> Self {
        let c = &contract.config;
        let block = c.planner_block;
        let layout = Layout {
            planner_anchors: (c.planner_context + block).div_ceil(block) * block,
            renderer_anchors: contract.windows.iter().map(|w| w.len()).max().unwrap_or(0).max(1),
            ring: 1 + c.history.max(contract.baseline_history()),
            chunk: c.chunk,
            block_starts: contract.blocks.iter().map(|b| b.start).collect(),
            layers: config.num_layers,
            heads: config.num_heads,
            head_dim: config.head_dim(),
            tokens_per_frame: (height / config.patch_size[1]) * (width / config.patch_size[2]),
        };
        Self { layout, device: device.clone(), windows: HashMap::new() }
    }

    /// The same windows (none created yet) on `device`.
    pub fn to_device(&self, device: &B::Device) -> Self {
        Self { layout: self.layout.clone(), device: device.clone(), windows: HashMap::new() }
    }

    /// Readies `node`'s window: copies in the entries of `reads` (of `node.reads`, in order,
    /// each with its key and the version it is of; a prompt switch may drop some) that the window
    /// does not hold and names the slots of the forward. `None`: the node reads nothing and
    /// attends to itself only.
    pub fn prepare(&mut self, node: &Node, reads: &[(KvKey, ChunkKv<B>, usize)]) -> Result<Option<WindowKey>> {
        if node.reads.is_empty() {
            return Ok(None);
        }
        let key = WindowKey::of(node);
        let l = &self.layout;
        let slots = l.slots(key);
        let target = l.target(key, node)?;
        let spans: Vec<(Range<usize>, (KvKey, usize))> = reads
            .iter()
            .map(|(k, e, version)| {
                let s = l.slot_of(key, k);
                (s..s + e.tokens() / l.tokens_per_frame, (*k, *version))
            })
            .collect();
        let mut sorted: Vec<Range<usize>> = spans.iter().map(|(r, _)| r.clone()).collect();
        sorted.sort_by_key(|r| r.start);
        if sorted.windows(2).any(|p| p[0].end > p[1].start) {
            return Err(SchedError::Graph(format!("node {}: its reads {:?} collide in the window slots {sorted:?}", node.id, node.reads)));
        }
        let held = self.windows.entry(key).or_insert_with(|| Held {
            window: KvWindow::new(l.layers, l.heads, l.head_dim, l.tokens_per_frame, slots, &self.device),
            held: vec![None; slots],
        });
        let model = |source| SchedError::Model { node: node.id, source };
        for ((range, k), (_, entry, _)) in spans.iter().zip(reads) {
            if held.held[range.clone()].iter().any(|h| h.as_ref() != Some(k)) {
                held.window.write(range.start, entry).map_err(model)?;
                held.held[range.clone()].iter_mut().for_each(|h| *h = Some(*k));
            }
        }
        held.window.attend(spans.into_iter().map(|(r, _)| r), target, node.positions.len()).map_err(model)?;
        Ok(Some(key))
    }

    pub fn window(&self, key: WindowKey) -> &KvWindow<B> {
        &self.windows[&key].window
    }

    /// After `node`'s forward through window `key`: its target slots hold its own K/V, which is
    /// what it published (one chunk key, or one anchor key per frame) or nothing reusable.
    pub fn published(&mut self, node: &Node, key: WindowKey) -> Result<()> {
        let target = self.layout.target(key, node)?;
        let frames = node.positions.len();
        let held = &mut self.windows.get_mut(&key).expect("prepared window").held[target..target + frames];
        for (f, h) in held.iter_mut().enumerate() {
            *h = match node.publishes.len() {
                1 => Some((node.publishes[0], 0)),
                n if n == frames => Some((node.publishes[f], 0)),
                _ => None,
            };
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::{DitRunner, NodeResult, NoiseSpec, Runner};
    use crate::contract::{Contract, ContractConfig};
    use crate::error::Result;
    use crate::exec::Placement;
    use crate::exec::execute;
    use crate::schedule::{Node, ScheduleKind};
    use burn::backend::NdArray;
    use burn::tensor::{Distribution, Tensor};
    use ff_model::dit::{ChunkKv, DitConfig, FrameLayout, Role, SegmentContext};

    type B = NdArray;

    /// The runner with its reads concatenated per layer (the path the windows replace).
    #[derive(Clone)]
    struct Concatenating(DitRunner<B>);

    impl Runner for Concatenating {
        type Latent = Tensor<B, 5>;
        type Kv = ChunkKv<B>;
        fn run(&mut self, node: &Node, source: Option<&Tensor<B, 5>>, reads: &[&ChunkKv<B>]) -> Result<NodeResult<Self>> {
            let prompt = self.0.prompts.begin(node)?;
            let (text, _) = self.0.text(&[node], &[prompt])?;
            let r = &self.0;
            let x = r.input(node, source);
            let m = r.model(node)?;
            let layout = FrameLayout::frames(node.positions.clone(), Role::Base);
            let out = m
                .model
                .forward_chunk(x.clone(), std::slice::from_ref(&node.timesteps), &layout, &text, &SegmentContext::new(reads.to_vec()))
                .unwrap();
            Ok(r.finish(node, x, out.prediction, out.kv))
        }
    }

    #[test]
    fn windows_give_the_keys_of_concatenated_reads() {
        // 11 chunks: the history ring (7 chunks) wraps and the anchor windows change.
        let dev = Default::default();
        let model = DitConfig::tiny().init::<B>(&dev);
        let text = Tensor::random([1, 6, model.config().text_dim], Distribution::Normal(0.0, 1.0), &dev);
        let noise = NoiseSpec { seed: 5, channels: 16, height: 4, width: 4 };
        for (kind, config) in [
            (ScheduleKind::FlashForward, ContractConfig::new(33).with_stages(2)),
            (ScheduleKind::SelfForcing, ContractConfig::new(27).with_stages(2)),
            (ScheduleKind::Hiar, ContractConfig::new(27).with_stages(2)),
        ] {
            let c = Contract::new(config).unwrap();
            let graph = kind.build(&c).unwrap();
            let runner = DitRunner::new(&model, text.clone(), &c, noise);
            let video = |outputs: Vec<Tensor<B, 5>>| Tensor::cat(outputs, 2);
            let windowed = video(execute(&graph, &Placement::serial(), vec![runner.clone()]).unwrap().outputs);
            let concatenated = video(execute(&graph, &Placement::serial(), vec![Concatenating(runner)]).unwrap().outputs);
            let err: f32 = (windowed - concatenated).abs().max().into_scalar();
            assert!(err <= 1e-4, "{kind}: {err}");
        }
    }
}
