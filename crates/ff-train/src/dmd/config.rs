//! [`DmdConfig`]: the Phase 2 hyper-parameters (paper Sec. 3.2, App. C.2; defaults are the
//! paper's, and where it is silent Self-Forcing's, each marked below), the inference contract the
//! rollout reads, and the engine configs of the generator and the critic.

use crate::TrainError; // not `Result`: the `Config` derive expands to code that uses std's
use crate::engine::{TrainConfig, Trainable};
use burn::config::Config;
use ff_sched::{Contract, ContractConfig};

/// Phase 2 self-rollout DMD.
///
/// Conventions chosen where the paper is silent (Self-Forcing unless noted):
/// * guidance is standard CFG, `p = u + s·(c − u)` on x₀-predictions: the critic's 1.0 is the
///   prompt-only prediction (Self-Forcing's `fake_guidance_scale = 0`), the teacher's 3.0 is
///   weight 3 (Self-Forcing's `guidance_scale = 3.0` is weight 4 in this convention);
/// * the score timestep is Self-Forcing's: `i` uniform in `0..1000`, `t = 1000·shift(i/1000)`
///   with shift 5, clamped to `[min_score_timestep, max_score_timestep]` = [20, 980]; σ = t/1000;
/// * one `t` per clip, shared by its tiles and heads; fresh ε per tile; the DMD normaliser
///   `mean|x̂₀ − p_real|` is per tile (a tile is one score-network sample, as Self-Forcing's
///   window); the loss is the mean over the whole clip (heads excluded);
/// * planner blocks also stop at the exit `k*` (Self-Forcing stops every block at the exit and
///   builds its cache from the exit-stage x̂₀): the anchors are the exit-stage x̂₀ of each block;
/// * generator: constant LR (no warm-up), β = (0, 0.999), weight decay 0.01, clip 10.0 for both
///   networks; the critic samples come from a fresh no-grad rollout with its own exit draw.
#[derive(Config, Debug, PartialEq)]
pub struct DmdConfig {
    /// Latent frames `L` of a rollout (81 = 20 s). Clips give the prompt and the latent shape.
    #[config(default = 81)]
    pub latents: usize,
    /// Denoising stages `S` (student timesteps 999, 937, 833, 624 at S = 4, shift 5).
    #[config(default = 4)]
    pub stages: usize,
    /// Anchor stride `Δ`.
    #[config(default = 10)]
    pub anchor_stride: usize,
    /// Planner block size `B_P` in anchors.
    #[config(default = 3)]
    pub planner_block: usize,
    /// Renderer chunk size `B_R` in latents.
    #[config(default = 3)]
    pub chunk: usize,
    /// Renderer history `H` in chunks (same stage).
    #[config(default = 5)]
    pub history: usize,
    /// Completed anchors a planner block reads.
    #[config(default = 18)]
    pub planner_context: usize,
    /// Shift of the student's timestep table.
    #[config(default = 5.0)]
    pub timestep_shift: f64,
    /// Whether the renderer's read of the anchor bank at the exit stage is connected (the path
    /// that trains the planner). `false` detaches it (ablation; the routing test).
    #[config(default = true)]
    pub connect_anchor_read: bool,
    /// `W_score`: latent positions a score network sees (tiles of `W` latents, later tiles
    /// `W − 1` latents after their image head).
    #[config(default = 21)]
    pub score_window: usize,
    /// Classifier-free guidance of the real score (teacher) against the empty prompt.
    #[config(default = 3.0)]
    pub real_guidance: f64,
    /// Guidance of the critic (1.0: the prompt-only prediction).
    #[config(default = 1.0)]
    pub fake_guidance: f64,
    /// Shift of the score-timestep draw (Self-Forcing: 5).
    #[config(default = 5.0)]
    pub score_timestep_shift: f64,
    /// Clamp of the score timestep (Self-Forcing: 0.02·1000, 0.98·1000).
    #[config(default = 20.0)]
    pub min_score_timestep: f64,
    /// Upper bound of that clamp (timestep units, 0..1000).
    #[config(default = 980.0)]
    pub max_score_timestep: f64,
    /// Probability that a step's scored sample is the splice: the planner's anchors at their
    /// positions in place of the renderer's output there, for the generator's scores and the
    /// critic's samples alike. The scores then also judge the anchors, and the planner gets a
    /// direct DMD gradient besides the renderer's read. 0 (the paper): only the renderer's
    /// output is scored.
    #[config(default = 0.0)]
    pub anchor_score: f64,
    /// Euler steps of a frozen planner's sampler (0: the student's own planner, distilled to the
    /// `S` stages and trained with the renderer, as in the paper). Above 0 the anchors come from
    /// a frozen planner (`DmdShared::new`'s `planner`, e.g. Phase 1's) sampled as inference
    /// samples it, `planner_steps` guided Euler steps; only the renderer trains, on the anchors
    /// it will read at inference.
    #[config(default = 0)]
    pub planner_steps: usize,
    /// Classifier-free guidance of each frozen-planner step against the empty prompt (1:
    /// unguided; above 1 needs `planner_steps > 0`).
    #[config(default = 1.0)]
    pub planner_guidance: f64,
    /// Critic updates per generator update (1:5).
    #[config(default = 5)]
    pub critic_updates: usize,
    /// Critic updates before the run's first generator update (0: none, as a run from Phase 1,
    /// whose critic starts as the teacher beside a student close to it). A run that continues a
    /// trained student (an export, see `checkpoint::unmerge_roles`) starts with a fresh critic
    /// that knows nothing of the student's samples: these updates fit it first.
    #[config(default = 0)]
    pub critic_warmup: usize,
    /// Learning rate of the critic's LoRA.
    #[config(default = 1e-6)]
    pub critic_lr: f64,
    /// Rank of the critic's LoRA (the paper's 256; LongLive uses r = α).
    #[config(default = 256)]
    pub critic_lora_rank: usize,
    /// Scale α of the critic's LoRA (the update is scaled by α / rank).
    #[config(default = 256.0)]
    pub critic_lora_alpha: f64,
}

impl DmdConfig {
    /// The engine defaults of the generator: the paper's LR 1e-5, EMA 0.999, batch 128, 100
    /// generator updates (600 steps at 1:5), the full student trainable; Self-Forcing's constant
    /// LR and clip 10.0.
    pub fn generator_defaults() -> TrainConfig {
        TrainConfig::new().with_steps(100).with_warmup_steps(0).with_clip_norm(10.0).with_trainable(Trainable::All)
    }

    /// The critic's engine config: the generator's with the critic's LR, adapters only, the
    /// critic's LoRA, and a seed of its own.
    pub fn critic_train(&self, generator: &TrainConfig) -> TrainConfig {
        generator
            .clone()
            .with_lr(self.critic_lr)
            .with_warmup_steps(0)
            .with_trainable(Trainable::Adapters)
            .with_lora_rank(self.critic_lora_rank)
            .with_lora_alpha(self.critic_lora_alpha)
            .with_lora_shared(false)
            .with_steps(generator.steps * self.critic_updates + self.critic_warmup)
            .with_seed(generator.seed ^ 0xC417_1C00)
    }

    /// The contract config of the rollout's knobs at `latents` frames: what inference runs the
    /// trained student with (its `flashforward.json`), and what [`DmdConfig::contract`] widens.
    pub fn contract_config(&self, latents: usize) -> ContractConfig {
        ContractConfig::new(latents)
            .with_stages(self.stages)
            .with_anchor_stride(self.anchor_stride)
            .with_chunk(self.chunk)
            .with_planner_block(self.planner_block)
            .with_history(self.history)
            .with_planner_context(self.planner_context)
            .with_shift(self.timestep_shift)
            .with_planner_steps(self.planner_steps)
            .with_planner_guidance(self.planner_guidance)
    }

    /// The inference contract of the rollout (training reads what inference reads).
    pub fn contract(&self) -> crate::Result<Contract> {
        let config = self.contract_config(self.latents);
        let needed = (3 + (self.history + 1) * self.chunk).max(self.planner_context + self.planner_block);
        let config = config.clone().with_context_window(config.context_window.max(needed));
        Contract::new(config).map_err(|e| TrainError::Config(format!("dmd: {e}")))
    }

    /// Checks the values the contract does not.
    pub fn validate(&self) -> crate::Result<()> {
        let bad = |m: String| Err(TrainError::Config(format!("dmd: {m}")));
        if self.score_window < 2 {
            return bad(format!("score_window {} must be at least 2 (a head and a latent)", self.score_window));
        }
        if !(self.min_score_timestep > 0.0 && self.min_score_timestep <= self.max_score_timestep && self.max_score_timestep < 1000.0) {
            return bad(format!(
                "score timesteps [{}, {}] must satisfy 0 < min ≤ max < 1000",
                self.min_score_timestep, self.max_score_timestep
            ));
        }
        if !(0.0..=1.0).contains(&self.anchor_score) {
            return bad(format!("anchor_score {} must be a probability in [0, 1]", self.anchor_score));
        }
        if self.critic_updates == 0 || self.critic_lora_rank == 0 {
            return bad("critic_updates and critic_lora_rank must be positive".into());
        }
        if self.timestep_shift <= 0.0 || self.score_timestep_shift <= 0.0 {
            return bad("timestep shifts must be positive".into());
        }
        Ok(())
    }
}
