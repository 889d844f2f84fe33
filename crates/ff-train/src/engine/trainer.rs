//! [`Trainer`]: the training loop's state and one optimizer step.
//!
//! A step draws `batch` clip indices from the sampler (every node draws the same), gives clip `j`
//! its own random stream (forked from the step's seed, so its noise does not depend on which
//! node, device or micro-batch runs it), runs this node's share of them on its devices and sums
//! the gradients over all devices and nodes ([`parallel`](super::parallel)), clips the sum to the
//! global norm, applies AdamW at the warm-up learning rate, and folds the new weights into the
//! EMA. A step that fails (bad data, a worker error, a lost node) changes nothing.
//!
//! Input pipeline (`prefetch`, on by default): while a step runs, a loader thread reads the next
//! step's clips of this node (their indices follow from the sampler, so nothing depends on when
//! they are read). At most one step ahead is held (this node's clips of one step); the next step
//! uses them when it is given the same source (the same object: its address) and needs the same
//! indices, and reads them itself otherwise (after a failed step, a restore, another source). A
//! read error of the prefetch surfaces in the step that uses it. A caller that passes another
//! source at the address of an earlier one (a dropped temporary) should step with `prefetch` off.
//!
//! Context parallelism (`context_parallel = D`): the node's devices form groups of D consecutive
//! devices; one worker per group runs on its first device and shards its packed forwards across
//! the group ([`StepModule::for_step`]); the collective's peers are the groups' first devices.
//!
//! The trained module `M` is the student DiT by default; any Burn module trains the same way
//! (the codec: `Trainer<B, WanVae<B>>` with `trainable = "all"`).

use super::compute::StepModule;
use super::config::TrainConfig;
use super::ema::Ema;
use super::optim::{Optimizer, clip_global_norm};
use super::parallel::{self, ClipLoss, Collective, Job, Layout, Nodes};
use super::params::{ParamMap, assign, params, set_trainable};
use crate::data::{ClipSource, Sampler};
use crate::objective::Objective;
use crate::rng::TrainRng;
use crate::{Result, TrainError};
use burn::module::AutodiffModule;
use burn::tensor::Tensor;
use burn::tensor::backend::AutodiffBackend;
use ff_model::{AttentionBackend, WanDit};
use std::any::Any;

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
    /// Where this process stands among the run's nodes.
    pub(crate) nodes: Nodes,
    /// The next step's clips, read ahead (a [`Prefetch`] of the clip type last stepped).
    prefetched: Option<Box<dyn Any + Send>>,
}

/// Clips read ahead for the next step: from `source` (its address), at `indices`.
struct Prefetch<C> {
    source: usize,
    indices: Vec<usize>,
    clips: Vec<Result<C>>,
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
    M: AutodiffModule<B> + StepModule<B> + Send,
{
    /// A run from step 0 training the parameters of `model` that `config.trainable` selects
    /// (every one for `"all"`), over a dataset of `clips` clips. `model` lives on `devices[0]`;
    /// the EMA starts at its weights.
    pub fn for_module(config: TrainConfig, model: M, devices: Vec<B::Device>, clips: usize) -> Result<Self> {
        config.validate()?;
        let groups = config.groups(&devices)?;
        config.accumulation(groups.len())?;
        if clips == 0 {
            return Err(TrainError::Config("the dataset holds no clips".into()));
        }
        model.for_step(&config, &groups[0])?;
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
            nodes: Nodes::default(),
            prefetched: None,
            model,
            devices,
            config,
        })
    }

    /// This trainer as node `nodes.rank` of `nodes.count` (each with this trainer's devices);
    /// the batch must divide over all of their devices.
    pub fn with_nodes(mut self, nodes: Nodes) -> Result<Self> {
        nodes.validate()?;
        self.config.accumulation(nodes.count * self.leaders().len())?;
        self.nodes = nodes;
        Ok(self)
    }

    /// The first device of each data-parallel group (one worker each; the collective's peers).
    fn leaders(&self) -> Vec<B::Device> {
        // The grouping was checked when the trainer was made.
        self.config.groups(&self.devices).into_iter().flatten().map(|g| g[0].clone()).collect()
    }

    /// Where this process stands among the run's nodes.
    pub fn nodes(&self) -> &Nodes {
        &self.nodes
    }

    /// Ends this trainer's part in a multi-node run: waits until every node has passed its last
    /// all-reduce (so that none exits while another still reads from it); a failure is logged.
    pub fn close(&self) {
        if self.nodes.count > 1 {
            let leaders = self.leaders();
            match Collective::acquire::<B::InnerBackend>(&leaders, &self.nodes) {
                Ok(collective) => collective.barrier::<B::InnerBackend>(&leaders),
                Err(e) => tracing::warn!(target: "ff_train::engine", error = %e, "closing the collective"),
            }
        }
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

    /// One optimizer step over `batch` clips of `data` with `objective` (this node's share of
    /// them on its devices).
    pub fn step<C: Send + 'static, O: Objective<B, M, C> + Sync>(&mut self, objective: &O, data: &dyn ClipSource<C>) -> Result<StepReport> {
        let prefetched = self.prefetched.take();
        let batch = self.config.batch;
        let groups = self.leaders().len();
        let workers = self.nodes.count * groups;
        let (local, micro) = (batch / self.nodes.count, self.config.micro_batch_on(workers));
        let first_job = self.nodes.rank * local;
        let (mut sampler, mut rng) = (self.sampler.clone(), self.rng.clone());
        let step_rng = TrainRng::new(rng.next_u64());
        let mine = draw(&mut sampler, batch)?.split_off(first_job).into_iter().take(local).collect::<Vec<_>>();
        let source = data as *const dyn ClipSource<C> as *const () as usize;
        let clips: Vec<C> = match prefetched.and_then(|p| p.downcast::<Prefetch<C>>().ok()) {
            Some(p) if p.source == source && p.indices == mine => p.clips.into_iter().collect::<Result<_>>()?,
            _ => mine.iter().map(|&i| data.get(i)).collect::<Result<_>>()?,
        };
        let next = match self.config.prefetch && self.step + 1 < self.config.steps {
            true => draw(&mut sampler.clone(), batch)?.split_off(first_job).into_iter().take(local).collect(),
            false => Vec::new(),
        };
        let mut jobs = clips.into_iter().enumerate().map(|(k, clip)| Job { clip, rng: step_rng.fork((first_job + k) as u64) });
        let shares: Vec<Vec<Vec<Job<C>>>> =
            (0..groups).map(|_| (0..local / groups / micro).map(|_| jobs.by_ref().take(micro).collect()).collect()).collect();
        let layout = Layout { params: self.trainable_values().iter().map(|(k, v)| (k.clone(), v.dims()[0])).collect(), batch };
        let (model, devices, nodes) = (&self.model, &self.devices, &self.nodes);
        let (result, read_ahead) = std::thread::scope(|s| {
            let loader = (!next.is_empty()).then(|| s.spawn(|| next.iter().map(|&i| data.get(i)).collect::<Vec<_>>()));
            let result = parallel::run(model, &self.config, devices, nodes, &layout, first_job, objective, shares, 1.0 / batch as f64);
            (result, loader.and_then(|l| l.join().ok()))
        });
        let (grads, losses) = result?;
        self.prefetched = read_ahead.map(|clips| Box::new(Prefetch { source, indices: next, clips }) as Box<dyn Any + Send>);

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

/// The next `batch` indices of `sampler`.
fn draw(sampler: &mut Sampler, batch: usize) -> Result<Vec<usize>> {
    (0..batch).map(|_| sampler.next_index().ok_or_else(|| TrainError::Config("the dataset holds no clips".into()))).collect()
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
