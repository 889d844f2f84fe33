//! Data parallel over local devices: one worker thread per device, each with its own replica of
//! the model (`fork`: same weights, its own autodiff leaves), running its share of the step's
//! clips as accumulated micro-batches. The gradients are reduced to the first device by summing
//! the workers' maps in worker order (a fixed order: the same sum on every run), then the
//! optimizer runs once and the next step forks the updated model again: a reduce plus a broadcast
//! of the weights, equivalent to an all-reduce with a replicated optimizer. Tensors move with
//! Burn's `to_device` and results come back over the scoped threads' join (no burn-collective:
//! its feature rebuilds most of the dependency tree, and an own reduce keeps the order fixed).

use super::params::{ParamMap, add, gradients, to_device};
use crate::data::LatentClip;
use crate::objective::Objective;
use crate::rng::TrainRng;
use crate::{Result, TrainError};
use burn::module::AutodiffModule;
use burn::tensor::ElementConversion;
use burn::tensor::backend::AutodiffBackend;
use ff_model::AttentionBackend;

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

/// What one worker returns: its summed gradients and its clips' losses in order.
struct Share<B: AutodiffBackend> {
    grads: ParamMap<B::InnerBackend>,
    losses: Vec<ClipLoss>,
}

/// Runs the micro-batches of one device: each micro-batch's clip losses ([`Objective::losses`],
/// one batched forward where the objective has one) are summed, scaled by `scale` and
/// back-propagated once; the gradients of the micro-batches are summed.
fn run_share<B, M, C, O>(model: &M, objective: &O, micro_batches: Vec<Vec<Job<C>>>, scale: f64) -> Result<Share<B>>
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
            let scalar = |t: &burn::tensor::Tensor<B, 1>| t.clone().into_scalar().elem::<f64>();
            losses.push(ClipLoss { total: scalar(&loss.total), parts: loss.parts.iter().map(|(n, t)| (*n, scalar(t))).collect() });
            total = Some(match total {
                Some(t) => t + loss.total,
                None => loss.total,
            });
        }
        if let Some(total) = total {
            let g = (total * scale).backward();
            grads = add(grads, gradients(model, &g));
        }
    }
    Ok(Share { grads, losses })
}

/// Runs `shares[w]` (micro-batches of jobs) on `devices[w]`, one thread per device, and returns
/// the gradients summed over all workers on `devices[0]` with the clips' losses in job order.
pub fn run<B, M, C, O>(
    model: &M,
    devices: &[B::Device],
    objective: &O,
    shares: Vec<Vec<Vec<Job<C>>>>,
    scale: f64,
) -> Result<(ParamMap<B::InnerBackend>, Vec<ClipLoss>)>
where
    B: AutodiffBackend + AttentionBackend,
    B::InnerBackend: AttentionBackend,
    M: AutodiffModule<B> + Send,
    C: Send,
    O: Objective<B, M, C> + Sync,
{
    let main = &devices[0];
    let results: Vec<Result<Share<B>>> = std::thread::scope(|s| {
        let handles: Vec<_> = shares
            .into_iter()
            .zip(devices)
            .map(|(share, device)| {
                let replica = model.clone().fork(device);
                s.spawn(move || run_share(&replica, objective, share, scale))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err(TrainError::Worker("a worker thread panicked".into())))).collect()
    });
    let mut grads = ParamMap::new();
    let mut losses = Vec::new();
    for share in results {
        let share = share?;
        grads = add(grads, to_device(share.grads, main));
        losses.extend(share.losses);
    }
    Ok((grads, losses))
}
