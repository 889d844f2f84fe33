//! The memory a generation needs on each device, estimated before anything large is loaded, and
//! the check that refuses a run that would not fit.
//!
//! Estimate per device = weights held there (counted from the checkpoint headers) + K/V bank bytes
//! of the workers placed there (the sched crate's bank plan) + the activations of each worker's
//! biggest forward + the prompt's cross-attention K/V. Activations of one forward with `q` query
//! tokens over `k` keys: ~12 `[q, dim]` buffers (modulated hidden states, q/k/v before and after
//! RoPE, attention output), 2 `[k, dim]` (the gathered context K/V), 2 `[q, ffn]`, the attention
//! scores `heads × q × (k + text)` twice (scores and softmax; NdArray materialises them), and the
//! published K/V of all layers. It is an estimate with a stated composition, not a measurement.

use std::path::Path;

use crate::error::{Context, Result, invalid};
use ff_model::dit::DitConfig;
use ff_model::load::{CheckpointFile, CheckpointFiles, SafetensorsHeader};
use ff_sched::Graph;
use ff_sched::bank::{KvDims, bank_plan};
use ff_sched::exec::{Placement, Roles};
use ff_sched::schedule::{KvKey, NodeId};

use crate::executor::device_of;

/// One named part of an estimate.
#[derive(Debug, Clone, PartialEq)]
pub struct Part {
    /// What it is.
    pub what: String,
    /// Its size.
    pub bytes: u64,
}

/// What one device must hold at its peak.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Estimate {
    /// The parts, in the order added.
    pub parts: Vec<Part>,
}

impl Estimate {
    /// Adds a part.
    pub fn add(&mut self, what: impl Into<String>, bytes: u64) {
        self.parts.push(Part { what: what.into(), bytes });
    }

    /// The sum of the parts.
    pub fn total(&self) -> u64 {
        self.parts.iter().map(|p| p.bytes).sum()
    }

    /// Errors when the estimate exceeds `available` bytes on `device`, listing the parts.
    pub fn check(&self, device: &str, available: u64) -> Result<()> {
        if self.total() <= available {
            return Ok(());
        }
        let parts: Vec<String> = self.parts.iter().map(|p| format!("{}: {}", p.what, human(p.bytes))).collect();
        invalid!(
            "not enough memory on {device}: the run needs about {} but {} is available ({}); \
             use a smaller --height/--width, fewer latents, another --executor or more --devices",
            human(self.total()),
            human(available),
            parts.join(", ")
        )
    }
}

/// Bytes in GiB, MiB or KiB, with two decimals.
pub fn human(bytes: u64) -> String {
    let (unit, name) = match bytes {
        b if b >= 1 << 30 => (1u64 << 30, "GiB"),
        b if b >= 1 << 20 => (1 << 20, "MiB"),
        _ => (1 << 10, "KiB"),
    };
    format!("{:.2} {name}", bytes as f64 / unit as f64)
}

/// `MemAvailable` of a `/proc/meminfo` text, in bytes.
pub fn mem_available(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Available RAM of this machine, from `/proc/meminfo`.
pub fn available_ram() -> Result<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").context("cannot read /proc/meminfo for the memory check")?;
    mem_available(&text).context("/proc/meminfo has no MemAvailable line")
}

/// Tensor keys with their element counts, and the total, of a checkpoint: exact from safetensors
/// headers; a pickle (no keys listed) counts as its file size over 2 bytes per element when its
/// name says bf16/fp16, else 4.
pub fn checkpoint_contents(path: &Path) -> Result<(Vec<(String, u64)>, u64)> {
    let files = CheckpointFiles::resolve(path).with_context(|| format!("cannot read checkpoint {}", path.display()))?;
    let mut keys = Vec::new();
    let mut elements = 0;
    for file in &files.files {
        match file {
            CheckpointFile::Safetensors(p) => {
                let header = SafetensorsHeader::read(p)?;
                for (key, t) in header.tensors {
                    let n = t.shape.iter().product::<usize>() as u64;
                    elements += n;
                    keys.push((key, n));
                }
            }
            CheckpointFile::Torch { path, .. } => {
                let len = std::fs::metadata(path).with_context(|| format!("cannot read {}", path.display()))?.len();
                let name = path.to_string_lossy().to_ascii_lowercase();
                elements += len / if name.contains("bf16") || name.contains("fp16") { 2 } else { 4 };
            }
        }
    }
    Ok((keys, elements))
}

/// Elements of one full-weight DiT copy in a checkpoint, and whether it has roles: role vectors
/// and adapters are merged into a planner and a renderer copy, so they add no elements.
pub fn dit_contents(keys: &[(String, u64)], elements: u64) -> (u64, bool) {
    let role = |k: &str| k.contains("role_embedding") || k.contains(".adapters.");
    let role_elements: u64 = keys.iter().filter(|(k, _)| role(k)).map(|(_, n)| n).sum();
    (elements - role_elements, keys.iter().any(|(k, _)| role(k)))
}

/// Peak activation bytes of one DiT forward of `q` query tokens over `k` self-attention keys
/// (context + own) and `text` prompt tokens (see the module docs).
pub fn forward_activation_bytes(c: &DitConfig, q: usize, k: usize, text: usize, dtype_bytes: usize) -> u64 {
    let (q, k, text) = (q as u64, k as u64, text as u64);
    let (dim, ffn, heads, layers) = (c.dim as u64, c.ffn_dim as u64, c.num_heads as u64, c.num_layers as u64);
    let elements = 12 * q * dim + 2 * k * dim + 2 * q * ffn + 2 * heads * q * (k + text) + 2 * layers * q * dim;
    elements * dtype_bytes as u64
}

/// Bytes of the prompt's cross-attention K/V over all layers.
pub fn text_context_bytes(c: &DitConfig, dtype_bytes: usize) -> u64 {
    (2 * c.num_layers * c.text_len * c.dim * dtype_bytes) as u64
}

/// What the per-device estimate is made of.
pub struct Sizes<'a> {
    /// The DiT's config.
    pub dit: &'a DitConfig,
    /// Elements of one full-weight DiT copy, and whether the checkpoint has roles (then each role
    /// is its own merged copy; a plain model is one copy for both).
    pub dit_elements: u64,
    /// Whether the checkpoint has roles.
    pub roles: bool,
    /// VAE parameters and first-stage width (it decodes on device 0).
    pub vae_elements: u64,
    /// The VAE's first-stage width.
    pub vae_base_dim: usize,
    /// Video frame height and width in pixels, and latent frame height and width.
    pub pixels: [usize; 2],
    /// Latent frame height and width.
    pub latents: [usize; 2],
    /// Bytes per float.
    pub dtype_bytes: usize,
}

/// DiT copies a device holds for `roles` (see `DitRunner::for_roles` and `DitRunner::to_device`).
pub fn dit_copies(roles: Roles, has_roles: bool) -> u64 {
    match has_roles {
        true => u64::from(roles.planner) + u64::from(roles.renderer),
        false => u64::from(roles.planner || roles.renderer),
    }
}

/// The estimate of each of `devices` devices for `graph` on `placement`, whose forwards are
/// `forwards` (node groups run as one packed forward: one node each, or the batched executor's
/// waves; a packed forward's scores span all its queries and keys). The workers of a device share
/// one DiT copy (and prompt K/V) per role they run.
pub fn device_estimates(graph: &Graph, placement: &Placement, forwards: &[Vec<NodeId>], devices: usize, s: &Sizes) -> Vec<Estimate> {
    let c = s.dit;
    let [lh, lw] = s.latents;
    let dims = KvDims::from_dit(c, lh, lw, s.dtype_bytes);
    let per_frame = dims.tokens_per_frame;
    let dtype = s.dtype_bytes as u64;
    let frames_read = |key: &KvKey| match key {
        KvKey::Anchor(_) => 1,
        KvKey::Chunk { chunk, .. } => graph.contract.chunks[*chunk].len(),
    };
    let mut estimates = vec![Estimate::default(); devices];
    for (worker, banks) in bank_plan(graph, placement).iter().enumerate() {
        let biggest = forwards
            .iter()
            .filter(|group| group.first().is_some_and(|&id| placement.worker_of(&graph.nodes[id]) == worker))
            .map(|group| {
                let nodes = group.iter().map(|&id| &graph.nodes[id]);
                let own: usize = nodes.clone().map(|n| n.positions.len()).sum();
                let read: usize = nodes.flat_map(|n| &n.reads).map(frames_read).sum();
                forward_activation_bytes(c, own * per_frame, (own + read) * per_frame, c.text_len, s.dtype_bytes)
            })
            .max()
            .unwrap_or(0);
        let e = &mut estimates[device_of(worker, devices)];
        e.add(format!("worker {worker} K/V banks"), banks.bytes(&dims) as u64);
        e.add(format!("worker {worker} biggest forward"), biggest);
    }
    for (d, e) in estimates.iter_mut().enumerate() {
        let workers: Vec<usize> = (0..placement.workers()).filter(|&w| device_of(w, devices) == d).collect();
        let copies = dit_copies(Roles::of_workers(graph, placement, &workers), s.roles);
        if copies > 0 {
            e.add("DiT weights", copies * s.dit_elements * dtype);
            e.add("prompt K/V", copies * text_context_bytes(c, s.dtype_bytes));
        }
    }
    let [h, w] = s.pixels;
    estimates[0].add("VAE weights", s.vae_elements * dtype);
    estimates[0].add("VAE decode", 16 * (h * w * s.vae_base_dim) as u64 * dtype);
    estimates
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meminfo_available_line_is_read_in_bytes() {
        let text = "MemTotal:       24576000 kB\nMemFree:         1000 kB\nMemAvailable:   12345678 kB\n";
        assert_eq!(mem_available(text), Some(12_345_678 * 1024));
        assert_eq!(mem_available("MemTotal: 1 kB\n"), None);
        assert!(available_ram().unwrap() > 0);
    }

    #[test]
    fn estimate_refuses_what_does_not_fit_and_names_the_parts() {
        let mut e = Estimate::default();
        e.add("DiT weights", 3 << 30);
        e.add("K/V banks", 1 << 30);
        assert_eq!(e.total(), 4 << 30);
        assert!(e.check("cpu", 4 << 30).is_ok());
        let err = e.check("cpu", 2 << 30).unwrap_err().to_string();
        assert!(err.contains("about 4.00 GiB") && err.contains("2.00 GiB is available"), "{err}");
        assert!(err.contains("DiT weights: 3.00 GiB") && err.contains("K/V banks: 1.00 GiB"), "{err}");
        assert_eq!((human(3 << 19), human(1536)), ("1.50 MiB".to_string(), "1.50 KiB".to_string()));
    }

    #[test]
    fn activations_grow_with_queries_keys_and_scores() {
        let c = DitConfig::wan_t2v_1_3b();
        // One 480p chunk (3 latents × 1560 tokens) over 21 latents of context, 512 text tokens.
        let (q, k) = (3 * 1560, 21 * 1560);
        let bytes = forward_activation_bytes(&c, q, k, 512, 4);
        let scores = 2 * 12 * q as u64 * (k + 512) as u64 * 4;
        assert!(bytes > scores, "scores are part of the estimate");
        assert!(bytes < scores + (4u64 << 30), "and dominate it: {}", human(bytes));
        assert!(forward_activation_bytes(&c, q, 2 * k, 512, 4) > bytes);
        assert_eq!(forward_activation_bytes(&c, q, k, 512, 2) * 2, bytes);
        assert_eq!(text_context_bytes(&c, 4), 2 * 30 * 512 * 1536 * 4);
    }

    #[test]
    fn devices_hold_their_workers_banks_and_one_weight_copy() {
        let contract = ff_sched::Contract::new(ff_sched::ContractConfig::new(81)).unwrap();
        let graph = ff_sched::ScheduleKind::FlashForward.build(&contract).unwrap();
        let dit = DitConfig::wan_t2v_1_3b();
        let sizes = Sizes {
            dit: &dit,
            dit_elements: 1_400_000_000,
            roles: false,
            vae_elements: 127_000_000,
            vae_base_dim: 96,
            pixels: [480, 832],
            latents: [60, 104],
            dtype_bytes: 4,
        };
        let single = |g: &Graph| -> Vec<Vec<NodeId>> { g.nodes.iter().map(|n| vec![n.id]).collect() };
        let nodes = single(&graph);
        let serial = device_estimates(&graph, &Placement::serial(), &nodes, 1, &sizes);
        let spread = device_estimates(&graph, &Placement::wavefront(4), &nodes, 4, &sizes);
        let shared = device_estimates(&graph, &Placement::wavefront(4), &nodes, 1, &sizes);
        let batched = device_estimates(&graph, &Placement::serial(), &ff_sched::exec::waves(&graph), 1, &sizes);
        assert_eq!(spread.len(), 4);
        let weights = |e: &Estimate| e.parts.iter().filter(|p| p.what == "DiT weights").count();
        assert!(spread.iter().all(|e| weights(e) == 1), "a weight copy per device");
        assert_eq!(weights(&shared[0]), 1, "workers on one device share the weights");
        // Each GPU holds one stage bank; one device holding all four holds more than serial does.
        assert!(spread[1].total() < serial[0].total());
        assert!(shared[0].total() > serial[0].total());
        // Packing a wave of up to 4 chunks into one forward multiplies its scores.
        assert!(batched[0].total() > serial[0].total() + (20 << 30), "{}", human(batched[0].total()));
        // 480p, 1.3B in f32: weights 5.2 GB + VAE; the materialised attention scores dominate.
        assert!(serial[0].total() > 6 << 30 && serial[0].total() < 128 << 30, "{}", human(serial[0].total()));
        let bidirectional = ff_sched::ScheduleKind::Bidirectional.build(&contract).unwrap();
        let clip = device_estimates(&bidirectional, &Placement::serial(), &single(&bidirectional), 1, &sizes);
        assert!(clip[0].total() > 1 << 40, "a whole-clip forward with materialised scores does not fit anywhere");
    }

    #[test]
    fn safetensors_headers_give_keys_and_elements() {
        let dir = std::env::temp_dir().join(format!("ff-generate-memory-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("w.safetensors");
        let header = br#"{"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},"b":{"dtype":"BF16","shape":[4],"data_offsets":[24,32]}}"#;
        let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
        bytes.extend_from_slice(header);
        bytes.extend_from_slice(&[0u8; 32]);
        std::fs::write(&path, bytes).unwrap();
        let (mut keys, elements) = checkpoint_contents(&path).unwrap();
        keys.sort();
        assert_eq!((keys, elements), (vec![("a".to_string(), 6), ("b".to_string(), 4)], 10));
        std::fs::write(&path, b"junk").unwrap();
        assert!(checkpoint_contents(&path).unwrap_err().to_string().contains("w.safetensors"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn dit_weights_match_the_runners_measured_parameter_bytes() {
        use burn::backend::NdArray;
        use burn::tensor::{Distribution, Tensor};
        use ff_model::LoraConfig;
        use ff_model::dit::WanDit;
        use ff_sched::exec::{DitRunner, NoiseSpec};
        let fixtures = ff_model::fixture::dir();
        let dir = fixtures.join("wan_dit_tiny");
        let config = DitConfig::from_json(dir.join("meta.json")).unwrap();
        let path = dir.join("weights_wan.safetensors");
        let (keys, total) = checkpoint_contents(&path).unwrap();
        let dev = Default::default();
        let plain = WanDit::<NdArray>::load(&config, &path, &dev).unwrap();
        let with_roles = plain.clone().with_roles(&LoraConfig::new(2));
        let contract = ff_sched::Contract::new(ff_sched::ContractConfig::new(41)).unwrap();
        let graph = ff_sched::ScheduleKind::FlashForward.build(&contract).unwrap();
        let text = Tensor::random([1, 10, config.text_dim], Distribution::Normal(0.0, 1.0), &dev);
        let noise = NoiseSpec { seed: 1, channels: config.in_channels, height: 4, width: 4 };
        for (model, role_keys) in [(plain, vec![]), (with_roles, vec![("role_embedding".to_string(), 2 * config.dim as u64)])] {
            // a role checkpoint lists role vectors (and adapters) beside the backbone
            let keys: Vec<(String, u64)> = keys.iter().cloned().chain(role_keys.clone()).collect();
            let (elements, roles) = dit_contents(&keys, total + role_keys.iter().map(|(_, n)| n).sum::<u64>());
            assert_eq!(roles, !role_keys.is_empty());
            let sizes = Sizes {
                dit: &config,
                dit_elements: elements,
                roles,
                vae_elements: 0,
                vae_base_dim: 8,
                pixels: [32, 32],
                latents: [4, 4],
                dtype_bytes: 4,
            };
            let runner = DitRunner::new(&model, text.clone(), &contract, noise);
            let single: Vec<Vec<NodeId>> = graph.nodes.iter().map(|n| vec![n.id]).collect();
            for (placement, devices) in
                [(Placement::serial(), 1), (Placement::wavefront(4), 4), (Placement::streaming(4), 5), (Placement::streaming(4), 2)]
            {
                let estimates = device_estimates(&graph, &placement, &single, devices, &sizes);
                for (d, e) in estimates.iter().enumerate() {
                    let workers: Vec<usize> = (0..placement.workers()).filter(|&w| device_of(w, devices) == d).collect();
                    let measured = runner.for_roles(Roles::of_workers(&graph, &placement, &workers)).to_device(&dev).weight_bytes() as u64;
                    let estimated: u64 = e.parts.iter().filter(|p| p.what == "DiT weights").map(|p| p.bytes).sum();
                    assert_eq!(estimated, measured, "roles {roles}, {placement:?} on {devices} devices, device {d}");
                }
            }
        }
    }
}
