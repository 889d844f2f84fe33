//! Context parallelism: one logical DiT forward over a token set, sharded across `D` devices by
//! whole latent frames.
//!
//! Shards are balanced runs of consecutive frames ([`shard_frames`]: sizes differ by at most one,
//! `min(D, frames)` shards). Shard `s` holds latents `[batch, C, |frames_s|, height, width]` on
//! device `s` and a replica of the model there. Everything in a DiT block is per token except
//! self-attention, so each shard runs its frames alone: patch embedding, modulation, q, k, v,
//! cross-attention, FFN, head. At each layer's self-attention the shards exchange K/V by an
//! **all-gather** ([`KvExchange`]): every shard receives every other shard's post-RoPE K and V
//! and concatenates them, in frame order, into the whole forward's K/V; its queries (frames
//! `frames_s`) then attend under the rows `frames_s` of the whole forward's block table
//! ([`kernels_cubecl::BlockTable::query_rows`]), over the same context the unsharded forward
//! reads. Each query row thus sums over exactly the keys the block table allows, in the
//! unsharded order, and the output matches the unsharded forward bit for bit where the kernels'
//! per-row results do not depend on how many rows run beside them (`dit::tests`).
//!
//! Why an all-gather and not the alternatives:
//! - **Ulysses** (all-to-all from token shards to head shards and back) moves q, k, v and the
//!   output, 4 tensors per layer, and needs heads divisible by D (1.3B has 12: not by 5, 8);
//!   each device then attends with all tokens of some heads: the same sums, but the context's K/V
//!   would have to be split by heads too.
//! - **Ring attention** passes K/V blocks around and merges partial softmax results with
//!   log-sum-exp rescaling: it overlaps transfer and compute, but the merge changes the
//!   summation order, so the output is no longer bit-identical to one device's.
//! - **All-gather** moves K and V once (`(D − 1)/D` of a layer's K/V into each device), keeps the
//!   kernels and the summation order untouched, and leaves every shard the whole forward's K/V,
//!   which is exactly what a planner's clean-endpoint forward publishes: every CP device then
//!   holds the anchor bank without another transfer. Its cost, the full K/V on each device, is
//!   small beside the activations for the few-frame planner forwards and is what a packed
//!   Phase 1 forward's attention reads anyway. It is not overlapped with compute; the latency
//!   model charges it (`ff_sched::sim::comm`).
//!
//! Tensors move between devices with Burn's `to_device`, so this works on every backend. Under
//! Autodiff the move is differentiable (gradients flow back to the shard that computed the K/V);
//! the shards' threads build one autodiff graph together, which needs the vendored burn-autodiff
//! (0.21.0 lost an op registered while another thread merged its graph away: about one sharded
//! step in three at 3 shards got wrong gradients).
//! [`ThreadGather`] connects shards that run on different threads (the executors' workers,
//! or [`context_parallel`]'s scoped threads) over channels, one per ordered pair of shards.

use super::kv::LayerKv;
use super::layout::FrameLayout;
use crate::error::{ModelError, Result};
use burn::tensor::Tensor;
use burn::tensor::backend::Backend;
use std::ops::Range;
use std::sync::mpsc::{Receiver, Sender, channel};

/// Balanced runs of whole frames: `frames` split over at most `devices` shards, sizes differing
/// by at most one (the first `frames mod n` shards take one more); no shard is empty.
///
/// ```
/// use ff_model::dit::shard_frames;
/// assert_eq!(shard_frames(7, 3), vec![0..3, 3..5, 5..7]);
/// assert_eq!(shard_frames(3, 4), vec![0..1, 1..2, 2..3]); // 3 anchors: one device idles
/// ```
pub fn shard_frames(frames: usize, devices: usize) -> Vec<Range<usize>> {
    let n = devices.min(frames).max(1);
    let (base, extra) = (frames / n, frames % n);
    let mut start = 0;
    (0..n)
        .map(|s| {
            let len = base + usize::from(s < extra);
            start += len;
            start - len..start
        })
        .collect()
}

/// The K/V exchange of a context-parallel forward, seen from one shard.
pub trait KvExchange<B: Backend> {
    /// Hands in this shard's own K/V of `layer` (`[batch, heads, shard_tokens, head_dim]`) and
    /// returns the whole forward's (`[batch, heads, tokens, head_dim]`, shards in frame order) on
    /// this shard's device. Every shard calls it once per layer, in layer order.
    fn all_gather(&self, layer: usize, own: LayerKv<B>) -> Result<LayerKv<B>>;
}

/// What the whole of a context-parallel forward reads ([`super::WanDit::forward_shard`]).
pub enum ShardReads<'a, B: Backend> {
    /// A chunk forward over published K/V (this device's copy of the context).
    Context(&'a dyn super::kv::KvContext<B>),
    /// A packed forward under frame-level rules.
    Packed(&'a super::layout::SegmentMask),
}

/// One shard of a context-parallel forward: its frames of the whole forward and its exchange.
pub struct Shard<'a, B: Backend> {
    /// The shard's frames, a run of the whole forward's frames.
    pub frames: Range<usize>,
    /// How the shard's K/V reaches the others.
    pub exchange: &'a dyn KvExchange<B>,
}

impl<B: Backend> Shard<'_, B> {
    /// The shard's part of the whole forward's `layout`.
    pub(super) fn layout(&self, whole: &FrameLayout) -> Result<FrameLayout> {
        if self.frames.is_empty() || self.frames.end > whole.len() {
            return Err(ModelError::Input(format!("shard frames {:?} are not a run of the forward's {} frames", self.frames, whole.len())));
        }
        Ok(FrameLayout { positions: whole.positions[self.frames.clone()].to_vec(), roles: whole.roles[self.frames.clone()].to_vec() })
    }
}

type Message<B> = (usize, LayerKv<B>);

/// An all-gather between shards on different threads: a channel per ordered pair of shards; a
/// shard sends its K/V, moved onto each peer's device, then receives one message from every
/// other active shard. With fewer frames than devices the first [`ThreadGather::set_active`]
/// shards compute and the rest only receive ([`ThreadGather::receive`]): every endpoint ends
/// with the whole forward's K/V.
pub struct ThreadGather<B: Backend> {
    index: usize,
    active: std::cell::Cell<usize>,
    devices: Vec<B::Device>,
    to: Vec<Option<Sender<Message<B>>>>,
    from: Vec<Option<Receiver<Message<B>>>>,
}

impl<B: Backend> ThreadGather<B> {
    /// One connected endpoint per device, shard `s` on `devices[s]`, all active.
    pub fn group(devices: &[B::Device]) -> Vec<Self> {
        let n = devices.len();
        let mut ends: Vec<Self> = (0..n)
            .map(|index| Self {
                index,
                active: std::cell::Cell::new(n),
                devices: devices.to_vec(),
                to: (0..n).map(|_| None).collect(),
                from: (0..n).map(|_| None).collect(),
            })
            .collect();
        for a in 0..n {
            for b in (0..n).filter(|&b| b != a) {
                let (tx, rx) = channel();
                ends[a].to[b] = Some(tx);
                ends[b].from[a] = Some(rx);
            }
        }
        ends
    }

    /// This endpoint's shard index.
    pub fn index(&self) -> usize {
        self.index
    }

    /// Shards in the group.
    pub fn devices(&self) -> usize {
        self.devices.len()
    }

    /// Shards `0..n` compute the next forwards (every endpoint of the group must agree:
    /// `shard_frames(frames, devices).len()`).
    pub fn set_active(&self, n: usize) {
        self.active.set(n.min(self.devices.len()));
    }

    /// An idle shard's part of a layer's exchange: the active shards' K/V, gathered.
    pub fn receive(&self, layer: usize) -> Result<LayerKv<B>> {
        self.gather(layer, None)
    }

    /// Gathers a latent `[batch, C, frames, height, width]` (e.g. a prediction) along frames in
    /// shard order, under exchange tag `tag` (distinct from the layers'); `None` on an idle shard.
    pub fn gather_frames(&self, tag: usize, part: Option<Tensor<B, 5>>, [height, width]: [usize; 2]) -> Result<Tensor<B, 5>> {
        let flat = |x: Tensor<B, 5>| {
            let [b, c, f, h, w] = x.dims();
            x.reshape([b, c, f, h * w])
        };
        let empty = Tensor::zeros([1, 1, 1, 1], &self.devices[self.index]);
        let whole = self.gather(tag, part.map(|x| LayerKv { k: flat(x), v: empty }))?;
        let [b, c, f, _] = whole.k.dims();
        Ok(whole.k.reshape([b, c, f, height, width]))
    }

    fn stopped(&self, peer: usize, layer: usize) -> ModelError {
        ModelError::Parallel(format!("shard {peer} stopped before exchange {layer} (seen from shard {})", self.index))
    }

    fn gather(&self, layer: usize, own: Option<LayerKv<B>>) -> Result<LayerKv<B>> {
        let active = self.active.get();
        if let Some(own) = &own {
            for (peer, tx) in self.to.iter().enumerate() {
                if let Some(tx) = tx {
                    let device = &self.devices[peer];
                    let kv = LayerKv { k: own.k.clone().to_device(device), v: own.v.clone().to_device(device) };
                    tx.send((layer, kv)).map_err(|_| self.stopped(peer, layer))?;
                }
            }
        }
        let mut parts = Vec::with_capacity(active);
        for (peer, rx) in self.from.iter().enumerate().take(active) {
            match (rx, &own) {
                (None, Some(own)) => parts.push(own.clone()),
                (None, None) => return Err(ModelError::Parallel(format!("shard {peer} is active and has nothing to send"))),
                (Some(rx), _) => {
                    let (at, kv) = rx.recv().map_err(|_| self.stopped(peer, layer))?;
                    if at != layer {
                        return Err(ModelError::Parallel(format!(
                            "shard {peer} sent exchange {at} while shard {} gathers {layer}",
                            self.index
                        )));
                    }
                    parts.push(kv);
                }
            }
        }
        Ok(if parts.len() == 1 { parts.remove(0) } else { LayerKv::cat(parts) })
    }
}

impl<B: Backend> KvExchange<B> for ThreadGather<B> {
    fn all_gather(&self, layer: usize, own: LayerKv<B>) -> Result<LayerKv<B>> {
        self.gather(layer, Some(own))
    }
}

/// Runs one context-parallel forward: `run(s, shard)` on a scoped thread per shard (shard `s`
/// on `devices[s]`, frames [`shard_frames`]`(frames, devices.len())`), returning the results in
/// shard order, or the first error. Threads share the caller's rayon pool; the executors instead
/// run each shard on their own worker thread and pool with a [`ThreadGather`] endpoint.
pub fn context_parallel<B: Backend, T: Send>(
    devices: &[B::Device],
    frames: usize,
    run: impl Fn(usize, &Shard<'_, B>) -> Result<T> + Sync,
) -> Result<Vec<T>> {
    let shards = shard_frames(frames, devices.len());
    let ends = ThreadGather::<B>::group(&devices[..shards.len()]);
    let run = &run;
    let results: Vec<Result<T>> = std::thread::scope(|scope| {
        let handles: Vec<_> = ends
            .into_iter()
            .zip(shards)
            .enumerate()
            .map(|(s, (end, frames))| scope.spawn(move || run(s, &Shard { frames, exchange: &end })))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))).collect()
    });
    // a shard that failed first makes its peers fail with "stopped": report the cause
    let first = results.iter().position(|r| matches!(r, Err(e) if !matches!(e, ModelError::Parallel(_))));
    match first {
        Some(i) => Err(results.into_iter().nth(i).and_then(Result::err).expect("an error")),
        None => results.into_iter().collect(),
    }
}

#[cfg(test)]
#[path = "parallel_tests.rs"]
mod tests;
