//! [`PackedLayout`]: the frames of one Phase 1 packed sequence (paper Alg. 2, App. C.1) and the
//! frame-level attention rules between them.
//!
//! Sequence 0 is the clip (`L` latents under the clip contract): clean planner copies `P⁰` of the
//! anchors, noised planner inputs `P^σ` of every anchor, noised renderer inputs `I^σ` of every
//! position. Sequences `1..=n` are the time-rebased crops (`L − Δ` latents at a latent offset,
//! under the crop contract): `P⁰` and `P^σ` only. Frames are ordered sequence by sequence, and
//! within one: `P⁰`, `P^σ`, `I^σ`.
//!
//! Every rule is a read of the inference contract ([`Contract`]), never a copy of it:
//! * `P^σ` of planner block j sees itself and the `P⁰` copies of `planner_context(j)`;
//! * `P⁰` of block j sees itself and the `P⁰` copies of `planner_context(j)` (the clean-endpoint
//!   forward that publishes the block's anchor K/V);
//! * `I^σ` of chunk i sees itself, the `I^σ` of `tail(i, H)` and the `P⁰` copies of `Γ(i)`.
//!
//! A block has clean copies only when some forward reads them (at L = 81: all 9 anchors of the
//! clip, which the renderer reads; 6 per crop, as a crop's last block has no consumer). No rule
//! crosses sequences.

use ff_model::dit::{FrameLayout, Role, SegmentMask};
use ff_sched::Contract;
use std::collections::BTreeSet;

/// Which copy of a latent a packed frame is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameKind {
    /// `P⁰`: clean planner copy of an anchor (t = 0), the K/V later forwards read.
    Clean,
    /// `P^σ`: noised planner input of an anchor.
    Planner,
    /// `I^σ`: noised renderer input of a position.
    Renderer,
}

/// Loss group of a noised frame (App. C.1: averaged per group, groups summed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Group {
    /// `P^σ` of the clip (9 latents at L = 81).
    Planner,
    /// `I^σ` of the clip (81).
    Renderer,
    /// `P^σ` of the crops (4 × 8 = 32).
    Rebased,
}

impl Group {
    /// Every group, in loss order.
    pub const ALL: [Group; 3] = [Group::Planner, Group::Renderer, Group::Rebased];

    /// Name in the loss parts and the metrics log.
    pub fn name(self) -> &'static str {
        match self {
            Group::Planner => "planner",
            Group::Renderer => "renderer",
            Group::Rebased => "rebased",
        }
    }
}

/// One frame of the packed sequence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PackedFrame {
    /// 0: the clip; `1..`: the crops.
    pub sequence: usize,
    /// Which copy of its latent the frame is.
    pub kind: FrameKind,
    /// Latent index in the clip's `L`-latent window (crop offset included).
    pub latent: usize,
    /// RoPE temporal position: the latent's index within its sequence (rebased in a crop).
    pub position: usize,
}

impl PackedFrame {
    /// The role the frame runs in: planner for clean and noised anchor copies, else renderer.
    pub fn role(&self) -> Role {
        match self.kind {
            FrameKind::Clean | FrameKind::Planner => Role::Planner,
            FrameKind::Renderer => Role::Renderer,
        }
    }

    /// Whether the frame is a noised input (a loss target), not a clean copy.
    pub fn is_noised(&self) -> bool {
        self.kind != FrameKind::Clean
    }

    /// The loss group of a noised frame; `None` for a clean copy.
    pub fn group(&self) -> Option<Group> {
        match (self.kind, self.sequence) {
            (FrameKind::Clean, _) => None,
            (FrameKind::Renderer, _) => Some(Group::Renderer),
            (FrameKind::Planner, 0) => Some(Group::Planner),
            (FrameKind::Planner, _) => Some(Group::Rebased),
        }
    }
}

/// Frame indices of one sequence, by anchor index / position.
#[derive(Clone, Debug, Default)]
pub struct SequenceFrames {
    /// `P⁰` frame of each anchor (None: its block has no consumer).
    pub clean: Vec<Option<usize>>,
    /// `P^σ` frame of each anchor.
    pub planner: Vec<usize>,
    /// `I^σ` frame of each position (empty in a crop).
    pub renderer: Vec<usize>,
}

/// The packed frames, their attention rules, and where each sequence's frames are.
#[derive(Clone, Debug)]
pub struct PackedLayout {
    /// Every frame of the packed sequence, in order.
    pub frames: Vec<PackedFrame>,
    /// Frame-level attention rules: which frames each frame reads.
    pub mask: SegmentMask,
    /// Where each sequence's frames are (0: the clip; `1..`: the crops).
    pub sequences: Vec<SequenceFrames>,
}

/// Anchor blocks some forward reads the clean copies of.
fn consumed_blocks(c: &Contract, renderer: bool) -> BTreeSet<usize> {
    let planner_reads = (0..c.num_blocks()).flat_map(|j| c.planner_context(j));
    let renderer_reads = (0..c.num_chunks()).filter(|_| renderer).flat_map(|i| c.window(i));
    planner_reads.chain(renderer_reads).map(|a| c.block_of(a)).collect()
}

impl PackedLayout {
    /// The clip under `clip` and one crop per entry of `offsets` under `crop` (the crop contract
    /// is needed only when `offsets` is non-empty).
    pub fn new(clip: &Contract, crop: Option<&Contract>, offsets: &[usize]) -> Self {
        let mut layout = Self { frames: Vec::new(), mask: SegmentMask::new(0), sequences: Vec::new() };
        let mut rules: Vec<(Vec<usize>, Vec<usize>)> = Vec::new();
        layout.push_sequence(clip, 0, true, &mut rules);
        if let Some(crop) = crop {
            for &o in offsets {
                layout.push_sequence(crop, o, false, &mut rules);
            }
        }
        layout.mask = rules.into_iter().fold(SegmentMask::new(layout.frames.len()), |m, (q, k)| m.allow(q, k));
        layout
    }

    fn push(&mut self, frame: PackedFrame) -> usize {
        self.frames.push(frame);
        self.frames.len() - 1
    }

    /// Appends one sequence's frames and its rules (query frames, key frames).
    fn push_sequence(&mut self, c: &Contract, offset: usize, renderer: bool, rules: &mut Vec<(Vec<usize>, Vec<usize>)>) {
        let sequence = self.sequences.len();
        let frame = |kind, position: usize| PackedFrame { sequence, kind, latent: offset + position, position };
        let consumed = consumed_blocks(c, renderer);
        let mut s = SequenceFrames::default();
        for (a, &p) in c.anchors.iter().enumerate() {
            s.clean.push(consumed.contains(&c.block_of(a)).then(|| self.push(frame(FrameKind::Clean, p))));
        }
        s.planner = c.anchors.iter().map(|&p| self.push(frame(FrameKind::Planner, p))).collect();
        if renderer {
            s.renderer = (0..c.config.latents).map(|p| self.push(frame(FrameKind::Renderer, p))).collect();
        }
        let clean = |anchors: std::ops::Range<usize>| -> Vec<usize> { anchors.filter_map(|a| s.clean[a]).collect() };
        for (j, block) in c.blocks.iter().enumerate() {
            let context = clean(c.planner_context(j));
            let inputs: Vec<usize> = block.clone().map(|a| s.planner[a]).collect();
            rules.push((inputs.clone(), [inputs, context.clone()].concat()));
            let copies = clean(block.clone());
            if !copies.is_empty() {
                rules.push((copies.clone(), [copies, context].concat()));
            }
        }
        for (i, chunk) in c.chunks.iter().enumerate().filter(|_| renderer) {
            let own: Vec<usize> = chunk.clone().map(|p| s.renderer[p]).collect();
            let history = c.tail(i, c.config.history).flat_map(|h| c.chunks[h].clone()).map(|p| s.renderer[p]);
            rules.push((own.clone(), own.iter().copied().chain(history).chain(clean(c.window(i))).collect()));
        }
        self.sequences.push(s);
    }

    /// Number of packed frames.
    pub fn len(&self) -> usize {
        self.frames.len()
    }

    /// Whether the layout holds no frame.
    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }

    /// RoPE positions and roles of the frames, for [`ff_model::WanDit::forward_packed`].
    pub fn frame_layout(&self) -> FrameLayout {
        FrameLayout { positions: self.frames.iter().map(|f| f.position).collect(), roles: self.frames.iter().map(|f| f.role()).collect() }
    }

    /// Timestep of every frame on the 1000 scale: `t` for noised copies, 0 for clean ones.
    pub fn timesteps(&self, t: f64) -> Vec<f64> {
        self.frames.iter().map(|f| if f.is_noised() { t } else { 0.0 }).collect()
    }

    /// Frames of loss group `g`, in order.
    pub fn group_frames(&self, g: Group) -> Vec<usize> {
        (0..self.len()).filter(|&f| self.frames[f].group() == Some(g)).collect()
    }
}
