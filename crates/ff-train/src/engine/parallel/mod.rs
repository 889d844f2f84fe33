//! Data parallel over devices and nodes: one worker thread per local device, each with its own
//! replica of the model (`fork`: same weights, its own autodiff leaves), running its share of the
//! step's clips as accumulated micro-batches; the workers' gradients are then summed over every
//! device of every node by `burn-collective`'s all-reduce ([`collective`]), so that every node
//! applies the same optimizer step to the same weights (a replicated optimizer).
//!
//! Each worker packs what it sends into one flat f32 tensor (one all-reduce per step; the sum of
//! a value and zeros is exact):
//!
//! ```text
//! [ gradient of each trainable parameter, flattened, in path order (zeros where it has none) ]
//! [ 1 per parameter it has a gradient of                                                      ]
//! [ 1 if its share failed                                                                     ]
//! [ (1, loss) for each of its clips, at the clip's index in the step's batch; (0, 0) elsewhere ]
//! ```
//!
//! A parameter no worker has a gradient of stays without one (no update, no weight decay, as in
//! a single worker). A worker whose share failed (an error or a panic) still takes part, so that
//! no peer waits for it; every node then fails the step (its own error where it has one). The
//! losses come back in batch order on every node; a loss's named parts are those of this node's
//! clips only.

pub mod collective;

use super::compute::StepModule;
use super::config::TrainConfig;
use super::params::{ParamMap, add, gradients};
use crate::data::LatentClip;
use crate::objective::Objective;
use crate::rng::TrainRng;
use crate::{Result, TrainError};
use burn::module::AutodiffModule;
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{ElementConversion, Tensor, TensorData};
pub use collective::{Collective, Nodes};
use ff_model::AttentionBackend;
use std::panic::{AssertUnwindSafe, catch_unwind};

/// One clip of a step with its random stream.
pub struct Job<C = LatentClip> {
    /// The clip.
    pub clip: C,
    /// The clip's own random stream (σ, noise, crops).
    pub rng: TrainRng,
}

/// Loss values of one clip (host).
#[derive(Clone, Debug, PartialEq)]
pub struct ClipLoss {
    /// The clip's total loss.
    pub total: f64,
    /// Its named parts, as the objective reports them.
    pub parts: Vec<(&'static str, f64)>,
}

/// What one worker computed: its summed gradients and its clips' losses in order.
struct Share<B: Backend> {
    grads: ParamMap<B>,
    losses: Vec<ClipLoss>,
}

/// Runs the micro-batches of one device on `model` (the step's form of `leaves`:
/// [`StepModule::for_step`]): each micro-batch's clip losses ([`Objective::losses`], one batched
/// forward where the objective has one) are summed, scaled by `scale` and back-propagated once;
/// the gradients at `leaves`' parameters of the micro-batches are summed.
fn run_share<B, M, C, O>(
    model: &M,
    leaves: &M,
    objective: &O,
    micro_batches: Vec<Vec<Job<C>>>,
    scale: f64,
) -> Result<Share<B::InnerBackend>>
where
    B: AutodiffBackend + AttentionBackend,
    B::InnerBackend: AttentionBackend,
    M: AutodiffModule<B>,
    O: Objective<B, M, C>,
{
    let mut grads = ParamMap::new();
    let mut losses = Vec::new();
    for jobs in micro_batches {
        let (clips, mut rngs): (Vec<C>, Vec<TrainRng>) = jobs.into_iter().map(|j| (j.clip, j.rng)).unzip();
        let clips: Vec<&C> = clips.iter().collect();
        let mut total = None;
        for loss in objective.losses(model, &clips, &mut rngs)? {
            let scalar = |t: &Tensor<B, 1>| t.clone().into_scalar().elem::<f64>();
            losses.push(ClipLoss { total: scalar(&loss.total), parts: loss.parts.iter().map(|(n, t)| (*n, scalar(t))).collect() });
            total = Some(match total {
                Some(t) => t + loss.total,
                None => loss.total,
            });
        }
        if let Some(total) = total {
            let g = (total * scale).backward();
            grads = add(grads, gradients(leaves, &g));
        }
    }
    Ok(Share { grads, losses })
}

/// What a step reduces: the trainable parameters (path and element count, in path order) and
/// the clips of the whole batch over all nodes.
pub struct Layout {
    /// Each trainable parameter's path and element count, in path order.
    pub params: Vec<(String, usize)>,
    /// Clips of the step over all nodes.
    pub batch: usize,
}

impl Layout {
    fn grads_len(&self) -> usize {
        self.params.iter().map(|(_, n)| n).sum()
    }

    /// Worker share `share` (or its failure) packed as described in the module doc; its clips
    /// sit at `first_job..` of the batch.
    fn pack<B: Backend>(&self, share: &Result<Share<B>>, first_job: usize, device: &B::Device) -> Tensor<B, 1> {
        let grads = share.as_ref().map(|s| &s.grads).ok();
        let mut parts: Vec<Tensor<B, 1>> = self
            .params
            .iter()
            .map(|(path, n)| grads.and_then(|g| g.get(path).cloned()).unwrap_or_else(|| Tensor::zeros([*n], device)))
            .collect();
        let mut tail: Vec<f32> = self.params.iter().map(|(path, _)| f32::from(grads.is_some_and(|g| g.contains_key(path)))).collect();
        tail.push(f32::from(share.is_err()));
        let mut losses = vec![0f32; 2 * self.batch];
        for (j, loss) in share.iter().flat_map(|s| &s.losses).enumerate() {
            // Exact: each loss is an f32 scalar read as f64.
            losses[2 * (first_job + j)..][..2].copy_from_slice(&[1.0, loss.total as f32]);
        }
        tail.extend(losses);
        let n = tail.len();
        parts.push(Tensor::from_data(TensorData::new(tail, [n]), device));
        Tensor::cat(parts, 0)
    }

    /// The summed gradients, whether any worker failed, and each clip's total loss (in batch
    /// order) from a reduced packing.
    fn unpack<B: Backend>(&self, reduced: Tensor<B, 1>) -> Result<(ParamMap<B>, bool, Vec<f64>)> {
        let grads_len = self.grads_len();
        let tail_len = self.params.len() + 1 + 2 * self.batch;
        let tail =
            reduced.clone().narrow(0, grads_len, tail_len).into_data().to_vec::<f32>().map_err(|e| TrainError::Worker(format!("{e:?}")))?;
        let mut grads = ParamMap::new();
        let mut offset = 0;
        for ((path, n), present) in self.params.iter().zip(&tail) {
            if *present > 0.0 {
                grads.insert(path.clone(), reduced.clone().narrow(0, offset, *n));
            }
            offset += n;
        }
        let failed = tail[self.params.len()] > 0.0;
        let losses = tail[self.params.len() + 1..].chunks(2).filter(|c| c[0] > 0.0).map(|c| f64::from(c[1])).collect();
        Ok((grads, failed, losses))
    }
}

/// Runs `shares[w]` (micro-batches of jobs) on the data-parallel group `w` of `devices`
/// ([`TrainConfig::groups`]: `context_parallel` consecutive devices), one thread per group on the
/// group's first device inside its own rayon pool (`ff_sched::exec::worker_pools`: the caller's
/// rayon threads shared among the groups, as the executors share them among their workers), and
/// returns the gradients summed over all workers of all `nodes` on `devices[0]` with the clips'
/// losses in batch order. This node's clips start at index `first_job` of the batch. Each worker
/// steps the form of its replica that `config` gives for its group ([`StepModule::for_step`]).
#[allow(clippy::too_many_arguments)]
pub fn run<B, M, C, O>(
    model: &M,
    config: &TrainConfig,
    devices: &[B::Device],
    nodes: &Nodes,
    layout: &Layout,
    first_job: usize,
    objective: &O,
    shares: Vec<Vec<Vec<Job<C>>>>,
    scale: f64,
) -> Result<(ParamMap<B::InnerBackend>, Vec<ClipLoss>)>
where
    B: AutodiffBackend + AttentionBackend,
    B::InnerBackend: AttentionBackend,
    M: AutodiffModule<B> + StepModule<B> + Send,
    C: Send,
    O: Objective<B, M, C> + Sync,
{
    let groups = config.groups(devices)?;
    let leaders: Vec<B::Device> = groups.iter().map(|g| g[0].clone()).collect();
    let collective = match (leaders.len(), nodes.count) {
        (1, 1) => None,
        _ => Some(Collective::acquire::<B::InnerBackend>(&leaders, nodes)?),
    };
    let starts: Vec<usize> = shares
        .iter()
        .scan(first_job, |next, s| {
            let start = *next;
            *next += s.iter().map(Vec::len).sum::<usize>();
            Some(start)
        })
        .collect();
    let pools = ff_sched::exec::worker_pools(groups.len()).map_err(|e| TrainError::Worker(e.to_string()))?;
    let results: Vec<Worked<B::InnerBackend>> = std::thread::scope(|s| {
        let handles: Vec<_> = shares
            .into_iter()
            .zip(&groups)
            .zip(&pools)
            .enumerate()
            .map(|(w, ((share, group), pool))| {
                let device = &group[0];
                let replica = model.clone().fork(device);
                let (collective, start) = (collective.as_ref(), starts[w]);
                s.spawn(move || {
                    let run = move || run_share(&replica.for_step(config, group)?, &replica, objective, share, scale);
                    let share = pool
                        .install(|| catch_unwind(AssertUnwindSafe(run)))
                        .unwrap_or_else(|_| Err(TrainError::Worker("a worker thread panicked".into())));
                    let reduced =
                        collective.map(|c| c.all_reduce(c.peers[w], layout.pack(&share, start, device)).and_then(|r| layout.unpack(r)));
                    (share, reduced)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| (Err(TrainError::Worker("a worker thread panicked".into())), None)))
            .collect()
    });
    finish(collective, results, first_job)
}

/// The gradients, failure flag and batch-ordered totals of a reduced packing.
type Reduced<B> = Result<(ParamMap<B>, bool, Vec<f64>)>;
/// What a worker thread returns: its own share and, with a collective, the reduced packing.
type Worked<B> = (Result<Share<B>>, Option<Reduced<B>>);

/// The step's gradients and losses from the workers' results (worker 0's reduced copy). A
/// collective call that failed breaks the collective; a worker's own error comes next, then the
/// failure of a worker elsewhere.
fn finish<B: Backend>(collective: Option<Collective>, results: Vec<Worked<B>>, first_job: usize) -> Result<(ParamMap<B>, Vec<ClipLoss>)> {
    let Some(collective) = collective else {
        let (share, _) = results.into_iter().next().expect("one worker");
        let share = share?;
        return Ok((share.grads, share.losses));
    };
    let mut shares = Vec::new();
    let mut reduced = Vec::new();
    for (share, r) in results {
        shares.push(share);
        match r {
            Some(Ok(r)) => reduced.push(r),
            Some(Err(e)) => {
                collective.fail(&e.to_string());
                return Err(e);
            }
            None => {
                collective.fail("a worker thread panicked");
                return Err(TrainError::Worker("a worker thread panicked".into()));
            }
        }
    }
    let mut local = Vec::new();
    for share in shares {
        local.extend(share?.losses);
    }
    let (grads, failed, totals) = reduced.into_iter().next().expect("at least one worker");
    if failed {
        return Err(TrainError::Collective("a worker on another device or node failed this step (see its log)".into()));
    }
    // This node's clips carry their parts; the others' only their total.
    let mut local = local.into_iter();
    let losses = totals
        .into_iter()
        .enumerate()
        .map(|(j, total)| match j >= first_job {
            true => local.next().unwrap_or(ClipLoss { total, parts: Vec::new() }),
            false => ClipLoss { total, parts: Vec::new() },
        })
        .collect();
    Ok((grads, losses))
}
