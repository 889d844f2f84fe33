//! [`TrainConfig`]: every hyper-parameter of the engine, with the paper's Phase 1 values as
//! defaults (App. C.1: AdamW β₁ = 0, β₂ = 0.999, weight decay 0.01, global-norm clip 1.0, LR
//! warm-up to 1e-5 over 100 steps then constant, EMA 0.999, 1,800 steps at global batch 128,
//! LoRA rank 256 on the roles).

use crate::TrainError; // not `Result`: the `Config` derive expands to code that uses std's
use burn::config::Config;
use ff_model::LoraConfig;
use serde::{Deserialize, Serialize};

/// Which parameters train; every other parameter is frozen (no gradient, no optimizer state).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Trainable {
    /// The role adapters and the role vectors (the paper's setting); the backbone is frozen.
    Lora,
    /// Every parameter: backbone, adapters and role vectors.
    All,
    /// The role adapters only (Phase 2's critic LoRA; its role vectors stay zero).
    Adapters,
    /// A codec's decoder side (`decoder.*` and `post_quant_conv.*`); its encoder, and with it the
    /// latent space a DiT was trained in, stays frozen.
    Decoder,
}

impl Trainable {
    /// Whether the parameter at `module_path` trains.
    pub fn contains(self, module_path: &str) -> bool {
        match self {
            Trainable::All => true,
            Trainable::Lora => module_path == "role_embedding" || module_path.contains(".adapters."),
            Trainable::Adapters => module_path.contains(".adapters."),
            Trainable::Decoder => module_path.starts_with("decoder.") || module_path.starts_with("post_quant_conv."),
        }
    }
}

/// Which activations the backward pass keeps (`[train] checkpointing`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Checkpointing {
    /// Every activation an op needs for its gradient is kept from the forward pass.
    None,
    /// Per-block recompute ([`ff_model::WanDit::with_block_checkpointing`]): the backward pass
    /// keeps each DiT block's input of a packed forward (Phase 1's layout) and runs the block
    /// again to differentiate it. The gradients are those without checkpointing, bit for bit at
    /// the tested sizes (the same ops on the same values). Forwards over published K/V (Phase 2's
    /// rollouts) keep their activations. A DiT setting: other trained modules refuse it.
    Blocks,
}

/// The dtype a step's forward and backward run in (`[train] precision`). The trained
/// parameters, their gradients, the AdamW moments, the EMA and the checkpoints are f32 in
/// either.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    /// Everything in f32.
    F32,
    /// The DiT's token path in bf16 on a cast of the f32 master weights
    /// ([`ff_model::WanDit::with_precision`]); its f32 islands (time embedding, modulation,
    /// norms before modulation, RoPE, the residual stream) in f32 as at inference. A DiT
    /// setting: other trained modules refuse it.
    Bf16,
}

/// The engine's hyper-parameters.
#[derive(Config, Debug, PartialEq)]
pub struct TrainConfig {
    /// Optimizer steps of the whole run.
    #[config(default = 1800)]
    pub steps: usize,
    /// Seed of the data order, the noise and the fresh LoRA matrices.
    #[config(default = 0)]
    pub seed: u64,
    /// Learning rate after warm-up.
    #[config(default = 1e-5)]
    pub lr: f64,
    /// Steps of linear warm-up: step s (1-based) uses `lr · min(1, s / warmup_steps)`.
    #[config(default = 100)]
    pub warmup_steps: usize,
    /// Learning rate at the last step as a fraction of `lr`, reached by a cosine decay that starts
    /// after the warm-up; 1 (the paper's setting) keeps the rate constant.
    #[config(default = 1.0)]
    pub final_lr_ratio: f64,
    /// AdamW first-moment decay (the paper uses 0: no momentum).
    #[config(default = 0.0)]
    pub beta_1: f64,
    /// AdamW second-moment decay.
    #[config(default = 0.999)]
    pub beta_2: f64,
    /// AdamW ε (PyTorch's default; Burn's own default is 1e-5).
    #[config(default = 1e-8)]
    pub epsilon: f64,
    /// Decoupled weight decay (PyTorch's AdamW default; Burn's own default is 1e-4).
    #[config(default = 0.01)]
    pub weight_decay: f64,
    /// Maximum global L2 norm of the gradient over all trainable parameters.
    #[config(default = 1.0)]
    pub clip_norm: f64,
    /// Decay of the exponential moving average of the trainable parameters.
    #[config(default = 0.999)]
    pub ema_decay: f64,
    /// Whether the EMA warms up: the decay of optimizer step `s` (1-based) is
    /// `min(ema_decay, s / (9 + s))` (0.1, 0.18, 0.25, …), so a short run exports its trained
    /// weights; `false`: `ema_decay` from the first step (runs recorded before this key).
    #[config(default = true)]
    pub ema_warmup: bool,
    /// Clips per optimizer step, over all devices and accumulation steps.
    #[config(default = 128)]
    pub batch: usize,
    /// Clips per forward/backward on one device; `batch / (devices · micro_batch)` micro-batches
    /// are accumulated per device. 0: a device's whole share of the batch in one micro-batch.
    #[config(default = 1)]
    pub micro_batch: usize,
    /// Which parameters train (the paper's: the role adapters and role vectors).
    #[config(default = "Trainable::Lora")]
    pub trainable: Trainable,
    /// Rank of the role adapters.
    #[config(default = 256)]
    pub lora_rank: usize,
    /// Adapter output scale is `lora_alpha / lora_rank`.
    #[config(default = 256.0)]
    pub lora_alpha: f64,
    /// One adapter both roles share instead of one per role (the ablation of role
    /// specialisation, paper Tab. 3; the role vectors stay per role).
    #[config(default = false)]
    pub lora_shared: bool,
    /// A checkpoint every this many steps (and at the end of the run).
    #[config(default = 100)]
    pub checkpoint_every: usize,
    /// Checkpoints kept on disk (older ones are removed after a newer one is complete).
    #[config(default = 2)]
    pub keep_checkpoints: usize,
    /// Activation checkpointing of the backward pass ([`Checkpointing`]).
    #[config(default = "Checkpointing::None")]
    pub checkpointing: Checkpointing,
    /// The dtype of a step's forward and backward ([`Precision`]).
    #[config(default = "Precision::F32")]
    pub precision: Precision,
    /// Devices each packed sample's forward and backward is sharded across (context
    /// parallelism: [`ff_model::WanDit::with_context_parallel`]). A node's devices form
    /// data-parallel groups of this many consecutive devices, one worker each; 1: no sharding.
    /// It shards the packed forwards (Phase 1's SFT); Phase 2 and the codec refuse it.
    #[config(default = 1)]
    pub context_parallel: usize,
    /// Read the next step's clips on a thread while a step runs (one step ahead at most); the
    /// clips and hence the run are the same either way.
    #[config(default = true)]
    pub prefetch: bool,
}

impl TrainConfig {
    /// Deserializes a config recorded by an earlier version (a checkpoint's `state.json`): keys
    /// it lacks take their defaults, which keep the behaviour of the version that wrote it (e.g.
    /// `final_lr_ratio` = 1, a constant rate). For `#[serde(deserialize_with = ...)]`.
    pub fn deserialize_with_defaults<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let recorded = serde_json::Value::deserialize(deserializer)?;
        // A key newer than the record whose default changes behaviour keeps the old behaviour.
        let mut merged = serde_json::to_value(TrainConfig::new().with_ema_warmup(false)).map_err(D::Error::custom)?;
        match (merged.as_object_mut(), recorded) {
            (Some(fields), serde_json::Value::Object(recorded)) => fields.extend(recorded),
            (_, other) => return Err(D::Error::custom(format!("a train config must be an object, got {other}"))),
        }
        serde_json::from_value(merged).map_err(D::Error::custom)
    }

    /// Learning rate of optimizer step `step` (1-based).
    pub fn lr_at(&self, step: usize) -> f64 {
        if step < self.warmup_steps {
            return self.lr * step as f64 / self.warmup_steps as f64;
        }
        let span = self.steps.saturating_sub(self.warmup_steps);
        if span == 0 {
            return self.lr;
        }
        let progress = (step - self.warmup_steps) as f64 / span as f64;
        let cosine = 0.5 * (1.0 + (std::f64::consts::PI * progress.min(1.0)).cos());
        self.lr * (self.final_lr_ratio + (1.0 - self.final_lr_ratio) * cosine)
    }

    /// The role adapters' config: `lora_rank`, `lora_alpha`, `lora_shared`.
    pub fn lora(&self) -> LoraConfig {
        LoraConfig::new(self.lora_rank).with_alpha(self.lora_alpha).with_shared(self.lora_shared)
    }

    /// Clips per micro-batch on each of `devices` devices (`micro_batch`, or the device's share
    /// when it is 0).
    pub fn micro_batch_on(&self, devices: usize) -> usize {
        match self.micro_batch {
            0 => self.batch / devices.max(1),
            clips => clips,
        }
    }

    /// The data-parallel workers of a node of `devices` devices: one per group of
    /// `context_parallel` consecutive devices; an error names the sizes that do not divide.
    pub fn workers(&self, devices: usize) -> crate::Result<usize> {
        let cp = self.context_parallel;
        if cp == 0 || devices == 0 || !devices.is_multiple_of(cp) {
            return Err(TrainError::Config(format!(
                "context_parallel = {cp} does not divide the {devices} devices into groups (give a multiple of it)"
            )));
        }
        Ok(devices / cp)
    }

    /// A node's `devices` as its data-parallel groups ([`TrainConfig::workers`]).
    pub fn groups<D: Clone>(&self, devices: &[D]) -> crate::Result<Vec<Vec<D>>> {
        self.workers(devices.len())?;
        Ok(devices.chunks(self.context_parallel).map(<[D]>::to_vec).collect())
    }

    /// Micro-batches each of `devices` workers (data-parallel groups) accumulates per step; an
    /// error names the sizes that do not divide.
    pub fn accumulation(&self, devices: usize) -> crate::Result<usize> {
        let per_step = devices * self.micro_batch_on(devices);
        if devices == 0 || per_step == 0 || self.batch == 0 || !self.batch.is_multiple_of(per_step) {
            return Err(TrainError::Config(format!(
                "batch {} is not a positive multiple of devices ({devices}) × micro_batch ({})",
                self.batch, self.micro_batch
            )));
        }
        Ok(self.batch / per_step)
    }

    /// Checks the values the engine relies on.
    pub fn validate(&self) -> crate::Result<()> {
        let bad = |what: String| Err(TrainError::Config(what));
        if !(0.0..1.0).contains(&self.beta_1) || !(0.0..1.0).contains(&self.beta_2) {
            return bad(format!("beta_1 {} and beta_2 {} must lie in [0, 1)", self.beta_1, self.beta_2));
        }
        if !(0.0..=1.0).contains(&self.ema_decay) {
            return bad(format!("ema_decay {} must lie in [0, 1]", self.ema_decay));
        }
        if !(0.0..=1.0).contains(&self.final_lr_ratio) {
            return bad(format!("final_lr_ratio {} must lie in [0, 1]", self.final_lr_ratio));
        }
        if self.lr < 0.0 || self.weight_decay < 0.0 || self.epsilon <= 0.0 || self.clip_norm <= 0.0 {
            return bad("lr and weight_decay must be ≥ 0, epsilon and clip_norm > 0".into());
        }
        if self.lora_rank == 0 || self.checkpoint_every == 0 || self.keep_checkpoints == 0 {
            return bad("lora_rank, checkpoint_every and keep_checkpoints must be positive".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warm_up_is_linear_then_constant() {
        let c = TrainConfig::new().with_lr(1e-3).with_warmup_steps(4);
        let lrs: Vec<f64> = (1..=6).map(|s| c.lr_at(s)).collect();
        assert_eq!(lrs, vec![2.5e-4, 5e-4, 7.5e-4, 1e-3, 1e-3, 1e-3]);
        assert_eq!(c.with_warmup_steps(0).lr_at(1), 1e-3);
    }

    #[test]
    fn cosine_decay_runs_from_the_end_of_warm_up_to_the_final_ratio() {
        let c = TrainConfig::new().with_lr(1e-3).with_warmup_steps(2).with_steps(6).with_final_lr_ratio(0.1);
        let lrs: Vec<f64> = (1..=6).map(|s| c.lr_at(s)).collect();
        // Steps 2..=6 span the half-period: cos(0), cos(π/4), cos(π/2), cos(3π/4), cos(π).
        let expected = [5e-4, 1e-3, 1e-4 + 9e-4 * (0.5 + 0.25 * 2f64.sqrt()), 5.5e-4, 1e-4 + 9e-4 * (0.5 - 0.25 * 2f64.sqrt()), 1e-4];
        for (got, want) in lrs.iter().zip(expected) {
            assert!((got - want).abs() < 1e-15, "{lrs:?}");
        }
        assert!(c.with_final_lr_ratio(1.5).validate().is_err());
    }

    #[test]
    fn a_config_recorded_without_newer_keys_reads_with_their_defaults() {
        #[derive(Deserialize)]
        struct State {
            #[serde(deserialize_with = "TrainConfig::deserialize_with_defaults")]
            train: TrainConfig,
        }
        let mut recorded = serde_json::to_value(TrainConfig::new().with_lr(3e-4)).unwrap();
        recorded.as_object_mut().unwrap().remove("final_lr_ratio");
        let state: State = serde_json::from_value(serde_json::json!({ "train": recorded })).unwrap();
        assert_eq!(state.train, TrainConfig::new().with_lr(3e-4));
        assert!(serde_json::from_value::<State>(serde_json::json!({ "train": 3 })).is_err());
    }

    #[test]
    fn defaults_are_the_papers_and_batches_must_divide() {
        let c = TrainConfig::new();
        assert_eq!((c.beta_1, c.beta_2, c.weight_decay, c.clip_norm, c.ema_decay), (0.0, 0.999, 0.01, 1.0, 0.999));
        assert_eq!((c.lr, c.warmup_steps, c.steps, c.batch, c.lora_rank), (1e-5, 100, 1800, 128, 256));
        assert_eq!(c.accumulation(4).unwrap(), 32);
        let err = c.clone().with_batch(6).with_micro_batch(4).accumulation(1).unwrap_err().to_string();
        assert!(err.contains("batch 6") && err.contains("micro_batch (4)"), "{err}");
        let whole = c.clone().with_batch(6).with_micro_batch(0);
        assert_eq!((whole.micro_batch_on(2), whole.accumulation(2).unwrap()), (3, 1), "0: a device's share at once");
        assert!(whole.with_batch(3).accumulation(2).is_err(), "3 clips do not split over 2 devices");
        assert!(Trainable::Lora.contains("blocks.0.self_attn.q.adapters.1.b") && Trainable::Lora.contains("role_embedding"));
        assert!(!Trainable::Lora.contains("blocks.0.self_attn.q.base.weight") && Trainable::All.contains("head.modulation"));
    }
}
