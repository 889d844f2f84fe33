//! [`Trainer`]: the training loop's state and one optimizer step.
//!
//! A step draws `batch` clips from the sampler, gives clip `j` its own random stream (forked from
//! the step's seed, so its noise does not depend on which device or micro-batch runs it), runs
//! them on the devices ([`parallel`](super::parallel)), clips the summed gradient to the global
//! norm, applies AdamW at the warm-up learning rate, and folds the new weights into the EMA. A
//! step that fails (bad data, a worker error) changes nothing.
//!
//! The trained module `M` is the student DiT by default; any Burn module trains the same way
//! (the codec: `Trainer<B, WanVae<B>>` with `trainable = "all"`).

use super::config::TrainConfig;
use super::ema::Ema;
use super::optim::{Optimizer, clip_global_norm};
use super::parallel::{self, ClipLoss, Job};
use super::params::{ParamMap, assign, params, set_trainable};
use crate::data::{ClipSource, Sampler};
use crate::objective::Objective;
use crate::rng::TrainRng;
use crate::{Result, TrainError};
use burn::module::AutodiffModule;
use burn::tensor::Tensor;
use burn::tensor::backend::AutodiffBackend;
use ff_model::{AttentionBackend, WanDit};

/// What one optimizer step did (host values, for the progress bar and the metrics log).
#[derive(Clone, Debug, PartialEq)]
pub struct StepReport {
    /// Optimizer steps done, this one included (1-based).
    pub step: usize,
    /// Learning rate the step used.
    pub lr: f64,
    /// Mean loss over the step's clips.
    pub loss: f64,
    /// Mean of each named loss part over the clips that report it.
    pub parts: Vec<(&'static str, f64)>,
    /// Global gradient norm before clipping.
    pub grad_norm: f64,
    /// Clips the step trained on.
    pub clips: usize,
}

/// Model, optimizer, EMA, random stream and data position of a run.
pub struct Trainer<B: AutodiffBackend + AttentionBackend, M = WanDit<B>>
where
    B::InnerBackend: AttentionBackend,
{
    pub(crate) config: TrainConfig,
    pub(crate) devices: Vec<B::Device>,
    pub(crate) model: M,
    pub(crate) optimizer: Optimizer<B::InnerBackend>,
    pub(crate) ema: Ema<B::InnerBackend>,
    pub(crate) rng: TrainRng,
    pub(crate) sampler: Sampler,
    /// Clips in the dataset the sampler walks.
    pub(crate) clips: usize,
    pub(crate) step: usize,
}

impl<B: AutodiffBackend + AttentionBackend> Trainer<B>
where
    B::InnerBackend: AttentionBackend,
{
    /// A run from step 0 over a dataset of `clips` clips. `model` lives on `devices[0]` and must
    /// have its roles when `config.trainable` is LoRA; the EMA starts at its weights.
    pub fn new(config: TrainConfig, model: WanDit<B>, devices: Vec<B::Device>, clips: usize) -> Result<Self> {
        let trainable = config.trainable;
        if model.role_embedding.is_none() && trainable != super::Trainable::All {
            return Err(TrainError::Config(format!("trainable = {trainable:?} needs a model with roles (WanDit::with_roles)")));
        }
        Self::for_module(config, model, devices, clips)
    }
}

impl<B, M> Trainer<B, M>
where
    B: AutodiffBackend + AttentionBackend,
    B::InnerBackend: AttentionBackend,
    M: AutodiffModule<B> + Send,
{
    /// A run from step 0 training the parameters of `model` that `config.trainable` selects
    /// (every one for `"all"`), over a dataset of `clips` clips. `model` lives on `devices[0]`;
    /// the EMA starts at its weights.
    pub fn for_module(config: TrainConfig, model: M, devices: Vec<B::Device>, clips: usize) -> Result<Self> {
        config.validate()?;
        config.accumulation(devices.len())?;
        if clips == 0 {
            return Err(TrainError::Config("the dataset holds no clips".into()));
        }
        let trainable = config.trainable;
        let model = set_trainable(model, |p| trainable.contains(p));
        let ema = Ema::new(config.ema_decay, config.ema_warmup, params(&model.valid(), |p| trainable.contains(p)));
        if ema.values().is_empty() {
            return Err(TrainError::Config(format!("trainable = {trainable:?} selects no parameter of the model")));
        }
        Ok(Self {
            optimizer: Optimizer::new(&config),
            ema,
            rng: TrainRng::new(config.seed).fork(u64::MAX),
            sampler: Sampler::new(config.seed, clips),
            clips,
            step: 0,
            model,
            devices,
            config,
        })
    }

    /// The engine config.
    pub fn config(&self) -> &TrainConfig {
        &self.config
    }

    /// Optimizer steps done.
    pub fn step_count(&self) -> usize {
        self.step
    }

    /// The trained model (current weights).
    pub fn model(&self) -> &M {
        &self.model
    }

    /// The model with the EMA of the trainable parameters, for evaluation and export.
    pub fn ema_model(&self) -> M::InnerModule {
        assign(self.model.valid(), self.ema.values().clone())
    }

    /// The EMA of the trainable parameters, flattened, by module path.
    pub fn ema_values(&self) -> &ParamMap<B::InnerBackend> {
        self.ema.values()
    }

    /// The trainable parameters, flattened, by module path.
    pub fn trainable_values(&self) -> ParamMap<B::InnerBackend> {
        let trainable = self.config.trainable;
        params(&self.model.valid(), |p| trainable.contains(p))
    }

    /// One optimizer step over `batch` clips of `data` with `objective`.
    pub fn step<C: Send, O: Objective<B, M, C> + Sync>(&mut self, objective: &O, data: &dyn ClipSource<C>) -> Result<StepReport> {
        let batch = self.config.batch;
        let per_device = batch / self.devices.len();
        let (mut sampler, mut rng) = (self.sampler.clone(), self.rng.clone());
        let step_rng = TrainRng::new(rng.next_u64());
        let mut jobs = Vec::with_capacity(batch);
        for j in 0..batch {
            let index = sampler.next_index().ok_or_else(|| TrainError::Config("the dataset holds no clips".into()))?;
            jobs.push(Job { clip: data.get(index)?, rng: step_rng.fork(j as u64) });
        }
        let mut jobs = jobs.into_iter();
        let shares: Vec<Vec<Vec<Job<C>>>> = (0..self.devices.len())
            .map(|_| {
                let mine: Vec<Job<C>> = jobs.by_ref().take(per_device).collect();
                let mut mine = mine.into_iter();
                let micro = self.config.micro_batch_on(self.devices.len());
                (0..per_device / micro).map(|_| mine.by_ref().take(micro).collect()).collect()
            })
            .collect();
        let (grads, losses) = parallel::run(&self.model, &self.devices, objective, shares, 1.0 / batch as f64)?;

        let (grads, grad_norm) = clip_global_norm(grads, self.config.clip_norm);
        let step = self.step + 1;
        let lr = self.config.lr_at(step);
        let mut values = self.trainable_values();
        values.extend(self.optimizer.step(lr, &values, grads));
        self.ema.update(&values, step);
        let model = self.model.clone();
        self.model = assign(model, values.into_iter().map(|(k, v)| (k, Tensor::from_inner(v))).collect());
        (self.sampler, self.rng, self.step) = (sampler, rng, step);
        Ok(report(step, lr, grad_norm, &losses))
    }
}

fn report(step: usize, lr: f64, grad_norm: f64, losses: &[ClipLoss]) -> StepReport {
    let mean = |xs: &[f64]| xs.iter().sum::<f64>() / xs.len().max(1) as f64;
    let mut names: Vec<&'static str> = Vec::new();
    for (name, _) in losses.iter().flat_map(|l| &l.parts) {
        if !names.contains(name) {
            names.push(name);
        }
    }
    let parts = names
        .into_iter()
        .map(|n| {
            let xs: Vec<f64> = losses.iter().flat_map(|l| &l.parts).filter(|(m, _)| *m == n).map(|(_, x)| *x).collect();
            (n, mean(&xs))
        })
        .collect();
    let totals: Vec<f64> = losses.iter().map(|l| l.total).collect();
    StepReport { step, lr, loss: mean(&totals), parts, grad_norm, clips: losses.len() }
}
