//! The state contract: which latent positions, anchors, chunks, windows, histories and stages a
//! generation of `L` latents uses (paper Sec. 3, A.2; docs/ARCHITECTURE.md §4).
//!
//! * anchors `P(L, Δ) = {mΔ : mΔ < L} ∪ {L − 1}`, grouped into planner blocks of `B_P` anchors
//!   (the last block may be shorter);
//! * renderer chunks of `B_R` consecutive latents; when `B_R ∤ L` the **last chunk is shorter**
//!   (`L mod B_R` latents), so every position is rendered exactly once;
//! * anchor windows `Γ`: `G` consecutive anchors (`anchor_window`, default 3) sharing endpoints
//!   (`{0,10,20}, {20,30,40}, …`); when the windows do not end on the last anchor, the last window
//!   is the last `G` anchors; with fewer than `G` anchors the single window is all of them. Chunk `i` uses the **first window whose last anchor
//!   is at or after the chunk's last position** (so every chunk has a future anchor; at L = 81 the
//!   windows condition 7, 6, 7, 7 chunks);
//! * history `Tail_H(i) = max(0, i − H)..i`;
//! * `S` stages at the student timesteps of `1000·(1 − k/S)` warped by the shifted table
//!   (S = 4: 999, 937, 833, 624); "level" `S` is the clean endpoint (t = 0).
//! * the planner's sampler: by default the same `S` stages (a distilled planner re-noises its x0
//!   estimate at each stage); with `planner_steps = N > 0` it integrates the flow ODE by `N` Euler
//!   steps on the shifted grid `σ_l = shift(1 − l/N)` (a planner sampled as its teacher was, e.g.
//!   a Phase 1 planner), optionally with classifier-free guidance against the empty prompt
//!   (`planner_guidance`, two forwards per step). Planner "level" `N` is then its clean endpoint.

mod anchors;

use crate::error::SchedError;
use burn::config::Config;
use ff_model::FlowMatch;
use std::ops::Range;

/// Configuration of the state contract; defaults are the paper's.
#[derive(Config, Debug, PartialEq)]
pub struct ContractConfig {
    /// Latent frames `L` of the video.
    pub latents: usize,
    /// Denoising stages `S`.
    #[config(default = 4)]
    pub stages: usize,
    /// Anchor stride `Δ`.
    #[config(default = 10)]
    pub anchor_stride: usize,
    /// Anchors per renderer window `Γ(i)` (`G`); consecutive windows share an endpoint.
    #[config(default = 3)]
    pub anchor_window: usize,
    /// Renderer chunk size `B_R` in latents.
    #[config(default = 3)]
    pub chunk: usize,
    /// Planner block size `B_P` in anchors.
    #[config(default = 3)]
    pub planner_block: usize,
    /// Stage-matched history window `H` in chunks (0 removes the stage bank: ablation).
    #[config(default = 5)]
    pub history: usize,
    /// Completed anchors the planner attends to (besides its current block).
    #[config(default = 18)]
    pub planner_context: usize,
    /// Attention context budget `W_ctx` in latent positions (baselines derive their history).
    #[config(default = 21)]
    pub context_window: usize,
    /// Timestep shift of the flow-matching table.
    #[config(default = 5.0)]
    pub shift: f64,
    /// Whether renderer chunks read clean anchors (false removes planner and anchor bank: ablation).
    #[config(default = true)]
    pub use_anchors: bool,
    /// Euler steps of the planner's ODE sampler (0: the planner runs the `S` distilled stages).
    #[config(default = 0)]
    pub planner_steps: usize,
    /// Classifier-free guidance scale of the planner's Euler steps against the empty prompt
    /// (1: unguided, one forward per step).
    #[config(default = 1.0)]
    pub planner_guidance: f64,
}

/// A validated contract with its derived index sets.
///
/// At L = 81 with the paper's defaults (Δ = 10, G = 3, B_P = B_R = 3, S = 4):
///
/// ```
/// use ff_sched::{Contract, ContractConfig};
///
/// let c = Contract::new(ContractConfig::new(81)).unwrap();
/// assert_eq!(c.anchors, vec![0, 10, 20, 30, 40, 50, 60, 70, 80]);
/// assert_eq!((c.num_blocks(), c.num_chunks()), (3, 27));
/// assert_eq!(c.chunks[2], 6..9);
/// assert_eq!(c.anchors[c.window(2)], [0, 10, 20]); // chunk 6–8 reads Γ = {0, 10, 20} (paper Fig. 2)
/// assert_eq!(c.timesteps, vec![999.0, 937.0, 833.0, 624.0]);
///
/// // A contract past the attention budget is refused, naming W_ctx.
/// let e = Contract::new(ContractConfig::new(81).with_history(6)).unwrap_err();
/// assert!(e.to_string().contains("W_ctx"));
/// ```
#[derive(Debug, Clone, serde::Serialize)]
pub struct Contract {
    /// The validated configuration.
    pub config: ContractConfig,
    /// Anchor positions `P`, ascending.
    pub anchors: Vec<usize>,
    /// Planner blocks as ranges of anchor indices.
    pub blocks: Vec<Range<usize>>,
    /// Renderer chunks as ranges of latent positions.
    pub chunks: Vec<Range<usize>>,
    /// Anchor windows as ranges of anchor indices.
    pub windows: Vec<Range<usize>>,
    /// Window index of each chunk.
    pub chunk_window: Vec<usize>,
    /// Timestep of each stage on the 1000 scale (descending).
    pub timesteps: Vec<f64>,
    /// Timestep of each planner level but the clean endpoint (the stages' unless
    /// `planner_steps > 0`).
    pub planner_timesteps: Vec<f64>,
    #[serde(skip)]
    flow: FlowMatch,
}

impl Contract {
    /// Validates `config` and derives anchors, blocks, chunks, windows and stage timesteps.
    pub fn new(config: ContractConfig) -> crate::Result<Self> {
        let c = &config;
        let positive = [
            ("latents L", c.latents),
            ("stages S", c.stages),
            ("anchor stride Δ", c.anchor_stride),
            ("anchor window G", c.anchor_window),
            ("chunk size B_R", c.chunk),
            ("planner block B_P", c.planner_block),
        ];
        if let Some((name, _)) = positive.iter().find(|(_, v)| *v == 0) {
            return Err(SchedError::Config(format!("{name} must be at least 1")));
        }
        if c.stages > 1000 {
            return Err(SchedError::Config(format!("stages S = {} exceeds the 1000-step table", c.stages)));
        }
        if c.use_anchors && c.anchor_window + c.history * c.chunk + c.chunk > c.context_window {
            return Err(SchedError::Config(format!(
                "renderer context {} anchors + {} history chunks × {} + {} current latents exceeds W_ctx = {}",
                c.anchor_window, c.history, c.chunk, c.chunk, c.context_window
            )));
        }
        if c.planner_context + c.planner_block > c.context_window {
            return Err(SchedError::Config(format!(
                "planner context {} + block {} exceeds W_ctx = {}",
                c.planner_context, c.planner_block, c.context_window
            )));
        }
        if c.planner_steps > 1000 {
            return Err(SchedError::Config(format!("planner steps {} exceed the 1000-step table", c.planner_steps)));
        }
        if !(c.planner_guidance.is_finite() && c.planner_guidance >= 0.0) {
            return Err(SchedError::Config(format!("planner guidance {} must be a finite number ≥ 0", c.planner_guidance)));
        }
        if c.planner_guidance != 1.0 && c.planner_steps == 0 {
            return Err(SchedError::Config(format!(
                "planner guidance {} needs the Euler planner sampler (planner steps > 0); the distilled stages run unguided",
                c.planner_guidance
            )));
        }
        if c.context_window < c.chunk {
            return Err(SchedError::Config(format!("W_ctx {} is smaller than a chunk ({})", c.context_window, c.chunk)));
        }
        let anchors = anchors::anchor_set(c.latents, c.anchor_stride);
        let blocks = anchors::split(anchors.len(), c.planner_block);
        let chunks = anchors::split(c.latents, c.chunk);
        let windows = anchors::windows(anchors.len(), c.anchor_window);
        let chunk_window = chunks.iter().map(|ch| anchors::window_of(&anchors, &windows, ch.end - 1)).collect();
        let flow = FlowMatch::new(c.shift);
        let steps: Vec<f64> = (0..c.stages).map(|k| 1000.0 * (1.0 - k as f64 / c.stages as f64)).collect();
        let timesteps: Vec<f64> = flow.student_timesteps(&steps).into_iter().map(|t| t as f64).collect();
        let n = c.planner_steps;
        let planner_timesteps = match n {
            0 => timesteps.clone(),
            _ => (0..n).map(|l| flow.timestep(flow.shift_sigma(1.0 - l as f64 / n as f64))).collect(),
        };
        Ok(Self { config, anchors, blocks, chunks, windows, chunk_window, timesteps, planner_timesteps, flow })
    }

    /// `S`, renderer denoising stages.
    pub fn stages(&self) -> usize {
        self.config.stages
    }

    /// `N_C = N_R`, renderer chunks.
    pub fn num_chunks(&self) -> usize {
        self.chunks.len()
    }

    /// `N_P`, planner blocks.
    pub fn num_blocks(&self) -> usize {
        self.blocks.len()
    }

    /// Anchor indices of `Γ(chunk)`.
    pub fn window(&self, chunk: usize) -> Range<usize> {
        self.windows[self.chunk_window[chunk]].clone()
    }

    /// Planner block holding anchor index `anchor`.
    pub fn block_of(&self, anchor: usize) -> usize {
        anchor / self.config.planner_block
    }

    /// `Tail_len(chunk)`: the `len` chunks before `chunk` (fewer at the start).
    pub fn tail(&self, chunk: usize, len: usize) -> Range<usize> {
        chunk.saturating_sub(len)..chunk
    }

    /// Anchor indices the planner reads while generating `block`: the last `planner_context`
    /// completed anchors.
    pub fn planner_context(&self, block: usize) -> Range<usize> {
        let start = self.blocks[block].start;
        start.saturating_sub(self.config.planner_context)..start
    }

    /// Chunks of history the baselines keep: what fits in `W_ctx` beside the current chunk.
    pub fn baseline_history(&self) -> usize {
        (self.config.context_window - self.config.chunk) / self.config.chunk
    }

    /// Timestep of noise level `level` (`0..S` are the stages, `S` is the clean endpoint).
    pub fn timestep(&self, level: usize) -> f64 {
        self.timesteps.get(level).copied().unwrap_or(0.0)
    }

    /// σ of noise level `level` (0 at the clean endpoint).
    pub fn sigma(&self, level: usize) -> f64 {
        self.flow.sigma(self.timestep(level))
    }

    /// Whether the planner integrates its ODE by Euler steps instead of the distilled stages.
    pub fn planner_euler(&self) -> bool {
        self.config.planner_steps > 0
    }

    /// Whether each planner Euler step runs a guided pair of forwards.
    pub fn planner_guided(&self) -> bool {
        self.planner_euler() && self.config.planner_guidance != 1.0
    }

    /// The planner's clean-endpoint level: `planner_steps`, or `S`.
    pub fn planner_levels(&self) -> usize {
        self.planner_timesteps.len()
    }

    /// Timestep of planner level `level` (0 at the clean endpoint).
    pub fn planner_timestep(&self, level: usize) -> f64 {
        self.planner_timesteps.get(level).copied().unwrap_or(0.0)
    }

    /// σ of planner level `level` (0 at the clean endpoint).
    pub fn planner_sigma(&self, level: usize) -> f64 {
        self.flow.sigma(self.planner_timestep(level))
    }
}

#[cfg(test)]
mod tests;
