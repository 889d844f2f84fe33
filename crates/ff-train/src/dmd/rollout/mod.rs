//! The student's self-rollout with stochastic gradient truncation (paper Alg. 3, App. C.2).
//!
//! Given the exit stage `k*` (drawn once per step, the same on every worker):
//! * **planner**: each anchor block runs the student timesteps `0..=k*` causally over the anchor
//!   bank of the earlier blocks (read detached); its x̂₀ at `k*` are the block's anchors, and one
//!   clean-endpoint forward (t = 0) over them publishes their K/V into the bank `A`;
//! * **renderer**: every stage `0..=k*` is one packed block-causal forward over all `L`
//!   positions ([`RendererContext`]): chunk `i` reads itself, `≤ H` preceding chunks of the same
//!   stage and `A_Γ(i)`; the output is x̂₀ at `k*`.
//!
//! Stages before `k*` run on the `frozen` model (the student without gradients), the exit stage on
//! the `live` one. Between stages x̂₀ is re-noised to the next σ with fresh ε (not an Euler step).
//! The bank is detached wherever a later planner block reads it; the renderer's exit-stage read
//! stays connected (unless the config detaches it), the only path by which the loss reaches the
//! planner. Noise comes from the executors' counter-based stream ([`NoiseSpec`]): with `k* = S − 1`
//! the rollout is the serial FlashForward generation of the same seed.
//!
//! With a frozen planner ([`FrozenPlanner`], `DmdConfig::planner_steps > 0`) the anchors and
//! their bank come from it instead ([`Planned`], no gradients), and only the renderer part runs.
//!
//! Shapes: prompt `[1, text_len, text_dim]`; x̂₀ `[1, C, L, h, w]`; anchors `[1, C, |P|, h, w]`.

mod context;
mod frozen;

pub use context::RendererContext;
pub use frozen::{FrozenPlanner, Planned, rollout_seed};

use crate::Result;
use burn::tensor::Tensor;
use ff_model::dit::{ChunkKv, FrameLayout, LayerKv, SegmentContext, TextContext};
use ff_model::{AttentionBackend, FlowMatch, Role, WanDit};
use ff_sched::Contract;
use ff_sched::exec::{NoiseSpec, OUTPUT_STREAM, PLANNER_STREAM};

/// The student's two views for one rollout: `live` runs the exit stage (and the clean-endpoint
/// forwards), `frozen` the stages before it (e.g. `live.clone().no_grad()` on an autodiff
/// backend; the same model on a plain one).
pub struct Student<'a, B: AttentionBackend> {
    /// The model with gradients: the exit stage and the clean-endpoint forwards.
    pub live: &'a WanDit<B>,
    /// The model without gradients: the stages before the exit.
    pub frozen: &'a WanDit<B>,
}

/// What a rollout produced.
pub struct Rollout<B: AttentionBackend> {
    /// x̂₀ of every position at the exit stage, `[1, C, L, h, w]`.
    pub x0: Tensor<B, 5>,
    /// The anchors (exit-stage x̂₀ of the planner blocks), `[1, C, |P|, h, w]`.
    pub anchors: Tensor<B, 5>,
}

impl<B: AttentionBackend> Rollout<B> {
    /// x̂₀ with the anchors in place of the renderer's output at their positions `anchors` (the
    /// contract's `P`, ascending), `[1, C, L, h, w]`: the splice, with both roles' gradients.
    pub fn spliced(&self, anchors: &[usize]) -> Tensor<B, 5> {
        let latents = self.x0.dims()[2];
        let mut parts = Vec::with_capacity(2 * anchors.len() + 1);
        let mut start = 0;
        for (a, &p) in anchors.iter().enumerate() {
            if p > start {
                parts.push(self.x0.clone().narrow(2, start, p - start));
            }
            parts.push(self.anchors.clone().narrow(2, a, 1));
            start = p + 1;
        }
        if latents > start {
            parts.push(self.x0.clone().narrow(2, start, latents - start));
        }
        Tensor::cat(parts, 2)
    }
}

/// One rollout option besides the exit: whether the renderer's exit-stage read of `A` is connected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AnchorRead {
    /// The read keeps its gradient path to the planner (the paper's).
    Connected,
    /// The read sees the bank detached: the renderer's loss does not reach the planner.
    Detached,
}

fn detach<B: AttentionBackend>(kv: &ChunkKv<B>) -> ChunkKv<B> {
    ChunkKv { layers: kv.layers.iter().map(|l| LayerKv { k: l.k.clone().detach(), v: l.v.clone().detach() }).collect() }
}

/// Tokens `start..start + len` of every layer.
fn narrow<B: AttentionBackend>(kv: &ChunkKv<B>, start: usize, len: usize) -> ChunkKv<B> {
    ChunkKv {
        layers: kv.layers.iter().map(|l| LayerKv { k: l.k.clone().narrow(2, start, len), v: l.v.clone().narrow(2, start, len) }).collect(),
    }
}

/// The input of a forward at `level`: ε at level 0, `(1 − σ)·x̂₀ + σ·ε` after.
fn input<B: AttentionBackend>(
    c: &Contract,
    noise: &NoiseSpec,
    stream: u64,
    positions: &[usize],
    level: usize,
    previous: Option<Tensor<B, 5>>,
    device: &B::Device,
) -> Tensor<B, 5> {
    let eps = noise.sample::<B>(stream, positions, level, device);
    match previous {
        None => eps,
        Some(x0) => FlowMatch::noise(x0, eps, c.sigma(level)),
    }
}

/// Publishes the anchor K/V of planner block `j` into `bank` (which holds the earlier blocks'):
/// one clean-endpoint forward (t = 0) of `model` over the block's anchors `x0`
/// (`[1, C, |block|, h, w]`), reading the earlier anchors of its planner context, detached.
/// `model`: a student with roles (its planner role runs) or a plain planner.
pub(crate) fn publish<B: AttentionBackend>(
    model: &WanDit<B>,
    text: &TextContext<B>,
    c: &Contract,
    j: usize,
    x0: Tensor<B, 5>,
    bank: &mut Vec<ChunkKv<B>>,
) -> Result<()> {
    let positions: Vec<usize> = c.anchors[c.blocks[j].clone()].to_vec();
    let role = if model.role_embedding.is_some() { Role::Planner } else { Role::Base };
    let layout = FrameLayout::frames(positions.clone(), role);
    let context: Vec<ChunkKv<B>> = c.planner_context(j).map(|a| detach(&bank[a])).collect();
    let clean = model.forward_chunk(x0, &[vec![0.0; positions.len()]], &layout, text, &SegmentContext::new(context.iter().collect()))?;
    let per_frame = clean.kv.tokens() / positions.len();
    bank.extend((0..positions.len()).map(|f| narrow(&clean.kv, f * per_frame, per_frame)));
    Ok(())
}

/// The student's planner blocks up to `exit` (see the module docs): the anchors and their bank.
fn plan<'m, B: AttentionBackend>(
    student: &Student<B>,
    model: &impl Fn(usize) -> (&'m WanDit<B>, &'m TextContext<B>),
    text_live: &TextContext<B>,
    c: &Contract,
    noise: &NoiseSpec,
    exit: usize,
) -> Result<Planned<B>> {
    let device = student.live.device();
    let mut bank: Vec<ChunkKv<B>> = Vec::with_capacity(c.anchors.len());
    let mut anchors = Vec::with_capacity(c.num_blocks());
    for (j, block) in c.blocks.iter().enumerate() {
        let positions: Vec<usize> = c.anchors[block.clone()].to_vec();
        let layout = FrameLayout::frames(positions.clone(), Role::Planner);
        let context: Vec<ChunkKv<B>> = c.planner_context(j).map(|a| detach(&bank[a])).collect();
        let ctx = SegmentContext::new(context.iter().collect());
        let mut x0 = None;
        for k in 0..=exit {
            let (m, text) = model(k);
            let x = input(c, noise, PLANNER_STREAM, &positions, k, x0.map(|x: Tensor<B, 5>| x.detach()), &device);
            let out = m.forward_chunk(x.clone(), &[vec![c.timestep(k); positions.len()]], &layout, text, &ctx)?;
            x0 = Some(FlowMatch::x0_from_v(x, out.prediction, c.sigma(k)));
        }
        let x0 = x0.expect("at least one stage");
        publish(student.live, text_live, c, j, x0.clone(), &mut bank)?;
        anchors.push(x0);
    }
    Ok(Planned { anchors: Tensor::cat(anchors, 2), bank })
}

/// Runs the rollout up to `exit` (`< S`); see the module docs. `planned`: the anchors of a frozen
/// planner (`None`: the student plans).
pub fn rollout<B: AttentionBackend>(
    student: &Student<B>,
    prompt: Tensor<B, 3>,
    contract: &Contract,
    noise: &NoiseSpec,
    exit: usize,
    read: AnchorRead,
    planned: Option<Planned<B>>,
) -> Result<Rollout<B>> {
    let c = contract;
    let device = student.live.device();
    let text_live = student.live.text_context(prompt.clone());
    let text_frozen = student.frozen.text_context(prompt);
    let model = |k: usize| if k == exit { (student.live, &text_live) } else { (student.frozen, &text_frozen) };
    let Planned { anchors, bank } = match planned {
        Some(planned) => planned,
        None => plan(student, &model, &text_live, c, noise, exit)?,
    };

    // Renderer: one packed forward per stage over all positions.
    let positions: Vec<usize> = (0..c.config.latents).collect();
    let layout = FrameLayout::chunk(0, positions.len(), Role::Renderer);
    let detached: Vec<ChunkKv<B>> = bank.iter().map(detach).collect();
    let mut x0: Option<Tensor<B, 5>> = None;
    for k in 0..=exit {
        let (m, text) = model(k);
        let connected = k == exit && read == AnchorRead::Connected;
        let ctx = RendererContext::new(c, if connected { &bank } else { &detached });
        let x = input(c, noise, OUTPUT_STREAM, &positions, k, x0.map(|x| x.detach()), &device);
        let out = m.forward_chunk(x.clone(), &[vec![c.timestep(k); positions.len()]], &layout, text, &ctx)?;
        x0 = Some(FlowMatch::x0_from_v(x, out.prediction, c.sigma(k)));
    }
    Ok(Rollout { x0: x0.expect("at least one stage"), anchors })
}
