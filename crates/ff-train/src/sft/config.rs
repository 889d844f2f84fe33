//! [`SftConfig`]: the Phase 1 hyper-parameters (paper App. C.1; defaults are the paper's) and
//! the two inference contracts the packed layout is built from: the clip's (`L` latents) and the
//! time-rebased crops' (`L − Δ` latents).

use crate::TrainError;
use burn::config::Config;
use ff_sched::{Contract, ContractConfig};

/// Phase 1 packed time-rebased SFT.
///
/// σ sampling (the paper leaves it to the Wan recipe): one index drawn uniformly from the
/// 1000-step flow-matching table shifted by `timestep_shift` (σ = shift·s / (1 + (shift − 1)·s),
/// s = 1 − i/1000), as Wan2.1 / DiffSynth train their T2V models; the model sees t = 1000·σ.
///
/// Serde (Burn's `Config` derive) reads every key but `rebase_offsets` as required: a partial
/// TOML section is completed from `SftConfig::new()` by the caller.
#[derive(Config, Debug, PartialEq)]
pub struct SftConfig {
    /// Latent frames `L` of a training clip (81 = 20 s); a longer clip is cut at a random start.
    #[config(default = 81)]
    pub latents: usize,
    /// Anchor stride `Δ`.
    #[config(default = 10)]
    pub anchor_stride: usize,
    /// Planner block size `B_P` in anchors.
    #[config(default = 3)]
    pub planner_block: usize,
    /// Renderer chunk size `B_R` in latents.
    #[config(default = 3)]
    pub chunk: usize,
    /// Renderer history `H` in chunks (same σ).
    #[config(default = 5)]
    pub history: usize,
    /// Completed anchors a planner block reads (inference contract; 18 covers every earlier
    /// block of a 20 s clip).
    #[config(default = 18)]
    pub planner_context: usize,
    /// Time-rebased crops per clip, each at a distinct latent offset.
    #[config(default = 4)]
    pub rebased_crops: usize,
    /// Latent offsets the crops are drawn from (`None`: `1..Δ`, the paper's {1, …, 9}); a crop at
    /// offset `o` holds latents `o..o + L − Δ` at positions `0..L − Δ`.
    pub rebase_offsets: Option<Vec<usize>>,
    /// Shift of the flow-matching table σ is drawn from.
    #[config(default = 5.0)]
    pub timestep_shift: f64,
}

impl SftConfig {
    /// Latents of a time-rebased crop, `L − Δ` (71 at L = 81).
    pub fn crop_latents(&self) -> usize {
        self.latents.saturating_sub(self.anchor_stride)
    }

    /// The offsets crops are drawn from.
    pub fn offsets(&self) -> Vec<usize> {
        self.rebase_offsets.clone().unwrap_or_else(|| (1..self.anchor_stride).collect())
    }

    /// The inference contract of `latents` positions under this config's Δ, B_P, B_R, H.
    pub fn contract(&self, latents: usize) -> crate::Result<Contract> {
        let config = ContractConfig::new(latents)
            .with_anchor_stride(self.anchor_stride)
            .with_chunk(self.chunk)
            .with_planner_block(self.planner_block)
            .with_history(self.history)
            .with_planner_context(self.planner_context)
            .with_shift(self.timestep_shift);
        // Training reads what inference reads; the context budget only has to admit the layout.
        let needed = (3 + (self.history + 1) * self.chunk).max(self.planner_context + self.planner_block);
        let config = config.clone().with_context_window(config.context_window.max(needed));
        Contract::new(config).map_err(|e| TrainError::Config(format!("sft: {latents} latents: {e}")))
    }

    /// Checks the crop settings (the contracts check the rest).
    pub fn validate(&self) -> crate::Result<()> {
        let bad = |m: String| Err(TrainError::Config(format!("sft: {m}")));
        if self.timestep_shift.is_nan() || self.timestep_shift <= 0.0 {
            return bad(format!("timestep_shift {} must be positive", self.timestep_shift));
        }
        if self.rebased_crops == 0 {
            return Ok(());
        }
        let (len, offsets) = (self.crop_latents(), self.offsets());
        if len == 0 {
            return bad(format!("rebased crops of L − Δ = {} − {} latents are empty", self.latents, self.anchor_stride));
        }
        if let Some(o) = offsets.iter().find(|&&o| o == 0 || o + len > self.latents) {
            return bad(format!(
                "rebase offset {o} is outside 1..={} (a crop holds {len} of {} latents)",
                self.latents - len,
                self.latents
            ));
        }
        let mut distinct = offsets.clone();
        distinct.sort_unstable();
        distinct.dedup();
        if distinct.len() != offsets.len() || distinct.len() < self.rebased_crops {
            return bad(format!("{} rebased crops need as many distinct offsets, rebase_offsets has {:?}", self.rebased_crops, offsets));
        }
        Ok(())
    }
}
