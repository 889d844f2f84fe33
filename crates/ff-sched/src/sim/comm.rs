//! Communication in the latency model: links, the bytes a schedule moves, and the cost of a
//! context-parallel (CP) forward.
//!
//! **Links.** A message of `b` bytes over a [`Link`] takes `latency + 8·b / (gbps·10⁹)` seconds.
//! Links are not contended: each message sees the whole link, and a transfer overlaps the
//! compute of both ends (copy engines), delaying only the node that needs it.
//!
//! **Bytes** ([`Traffic`], from the DiT's dims and the RGB frame size; VAE stride 8 in space):
//! - inter-stage latents: a node whose source ran on another worker receives its input latent,
//!   `frames · C · h · w · 4` bytes (f32 latents);
//! - K/V to readers: the first time a worker reads an entry published on another worker it pulls
//!   everything that publisher published (an anchor block, a history chunk), `frames · 2 · layers ·
//!   dim · tokens_per_frame · 2` bytes (bf16 K/V);
//! - CP exchanges: a planner forward over `f` latent frames sharded over `D` devices by whole
//!   frames (the largest shard has `⌈f/D⌉` frames) all-gathers each layer's K and V: a ring of
//!   `D − 1` steps, each moving one shard's K/V of that layer, so `layers · (D − 1) · (α +
//!   shard_bytes/β)` seconds per pass and `layers · A · (D − 1) · shard_bytes` bytes over all
//!   devices, `A = min(D, f)` shards holding frames (the others only receive). The all-gather
//!   leaves every shard the whole K/V, so a published anchor needs no further transfer to the CP
//!   devices; the shards' predictions are gathered after each forward too (a latent's bytes, under
//!   1% of the K/V's: not counted);
//! - the role-weight swap: a device that runs planner forwards and then renders (the shared
//!   prologue; every device under CP) loads the renderer's weights from host memory before its
//!   first renderer forward, `role_weight_bytes` over the host link (paper A.2: "the planner
//!   weights are off-loaded and the renderer weights are loaded from pinned host memory").
//!
//! **A CP forward's time** is `compute/D_eff + exchange + overhead`:
//! - compute: the single-device forward cost scaled to the largest shard's frames, divided by the
//!   device's efficiency at the shard's token count relative to the whole forward's,
//!   `eff(n) = n / (n + n_ridge)`: a linear layer over `n` tokens does `2·n·W` FLOPs and reads `2·W`
//!   weight bytes, so its time is `2nW/P + 2W/BW = (2W/P)·(n + P/BW)`; `n_ridge = P/BW` is the
//!   device's ridge point (H100 SXM: 989 TFLOP/s bf16 over 3.35 TB/s ≈ 295 tokens), a property of
//!   the device and not fitted to any table;
//! - exchange: the all-gathers above, not overlapped with compute (attention needs every key);
//! - overhead: `cp_overhead_seconds` per pass, the host-side cost of launching the sharded forward
//!   on `D` devices and joining them (a barrier per forward); default 1 ms.

use crate::bank::KvDims;
use crate::error::{Result, SchedError};
use ff_model::dit::DitConfig;

/// A link: per-message latency and bandwidth.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Link {
    /// Bandwidth in gigabits per second (one direction).
    pub gbps: f64,
    /// Latency of one message, microseconds.
    pub latency_us: f64,
}

impl Link {
    /// NVLink-class, within one node (H100 SXM, NVLink 4: 450 GB/s per direction, 10 µs per
    /// message, NCCL's small-message latency).
    pub const NVLINK: Self = Self { gbps: 3600.0, latency_us: 10.0 };
    /// Between nodes: one 400 Gb/s NDR InfiniBand port per GPU, 20 µs per message.
    pub const INTER_NODE: Self = Self { gbps: 400.0, latency_us: 20.0 };
    /// Host to device: PCIe 5.0 ×16 from pinned memory, about 25 GB/s achieved (the paper's
    /// 0.10–0.13 s swap of the 1.3B model's 2.8 GB of bf16 weights).
    pub const PCIE: Self = Self { gbps: 200.0, latency_us: 10.0 };

    /// Seconds to move `bytes` in one message.
    pub fn seconds(&self, bytes: f64) -> f64 {
        self.latency_us * 1e-6 + bytes * 8.0 / (self.gbps * 1e9)
    }

    fn validate(&self, name: &str) -> Result<()> {
        if !(self.gbps > 0.0 && self.gbps.is_finite() && self.latency_us >= 0.0 && self.latency_us.is_finite()) {
            return Err(SchedError::Config(format!(
                "the {name} link needs a positive bandwidth and a latency ≥ 0, got {} Gb/s and {} µs",
                self.gbps, self.latency_us
            )));
        }
        Ok(())
    }
}

/// The sizes of what a schedule moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Traffic {
    /// K/V of one latent frame (all layers, bf16).
    pub kv: KvDims,
    /// One latent frame (f32).
    pub latent_frame_bytes: usize,
    /// One role's weights (bf16), moved by a role-weight swap.
    pub role_weight_bytes: usize,
}

impl Traffic {
    /// Bytes of `config` at RGB frames of `height × width` pixels (VAE stride 8), with
    /// `weight_params` parameters per role.
    pub fn new(config: &DitConfig, height: usize, width: usize, weight_params: usize) -> Self {
        let (h, w) = (height / 8, width / 8);
        Self {
            kv: KvDims::from_dit(config, h, w, 2),
            latent_frame_bytes: config.in_channels * h * w * 4,
            role_weight_bytes: weight_params * 2,
        }
    }

    /// Bytes of one layer's K and V of `frames` latent frames.
    fn layer_kv_bytes(&self, frames: usize) -> f64 {
        (frames * self.kv.frame_bytes() / self.kv.layers) as f64
    }
}

/// Links, sizes and device constants of the communication model (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CommModel {
    /// Device-to-device link (latents, K/V, CP exchanges).
    pub link: Link,
    /// Host-to-device link (role-weight swaps).
    pub host: Link,
    /// What the schedule moves.
    pub traffic: Traffic,
    /// Fixed cost of one context-parallel pass, seconds.
    pub cp_overhead_seconds: f64,
    /// The device's ridge point in tokens (peak FLOP/s over memory bytes/s).
    pub ridge_tokens: f64,
}

impl CommModel {
    /// H100-class defaults ([`Link::NVLINK`], [`Link::PCIE`], 1 ms CP overhead, 295-token ridge).
    pub fn h100(traffic: Traffic) -> Self {
        Self { link: Link::NVLINK, host: Link::PCIE, traffic, cp_overhead_seconds: 1e-3, ridge_tokens: 295.0 }
    }

    pub(super) fn validate(&self) -> Result<()> {
        self.link.validate("device")?;
        self.host.validate("host")?;
        if !(self.cp_overhead_seconds >= 0.0 && self.ridge_tokens >= 0.0) {
            return Err(SchedError::Config("the CP overhead and the ridge point must not be negative".into()));
        }
        Ok(())
    }

    /// Relative speed of a device at `frames` latent frames of tokens.
    fn efficiency(&self, frames: usize) -> f64 {
        let n = (frames * self.traffic.kv.tokens_per_frame) as f64;
        n / (n + self.ridge_tokens)
    }
}

/// Time and bytes of one forward.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub(super) struct ForwardCost {
    pub seconds: f64,
    /// Link time of its messages, summed over devices.
    pub comm_seconds: f64,
    /// Bytes of its messages, summed over devices.
    pub comm_bytes: f64,
}

/// A forward over `frames` latent frames of `passes` passes, sharded by whole frames over
/// `shards` devices; `frame_seconds` is the single-device cost of one frame of one pass.
pub(super) fn sharded_forward(frame_seconds: f64, frames: usize, passes: usize, shards: usize, comm: Option<&CommModel>) -> ForwardCost {
    let whole = frame_seconds * (frames * passes) as f64;
    if shards <= 1 || frames == 0 {
        return ForwardCost { seconds: whole, ..Default::default() };
    }
    let shard = frames.div_ceil(shards);
    let compute = frame_seconds * (shard * passes) as f64;
    let Some(m) = comm else {
        return ForwardCost { seconds: compute, ..Default::default() };
    };
    let compute = compute * m.efficiency(frames) / m.efficiency(shard);
    let shard_bytes = m.traffic.layer_kv_bytes(shard);
    let (layers, steps) = (m.traffic.kv.layers as f64, (shards - 1) as f64);
    // one device's ring: D − 1 steps per layer; each of the `active` shards (fewer than D when
    // the forward has fewer frames) sends its K/V to the D − 1 others
    let active = frames.min(shards) as f64;
    let exchange = passes as f64 * layers * steps * m.link.seconds(shard_bytes);
    ForwardCost {
        seconds: compute + exchange + passes as f64 * m.cp_overhead_seconds,
        comm_seconds: exchange * active,
        comm_bytes: passes as f64 * layers * active * steps * shard_bytes,
    }
}
