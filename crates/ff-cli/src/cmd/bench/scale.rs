//! The per-device memory plan of the paper's two phases at the 1.3B shape and 480p (60×104
//! latents, 1,560 tokens per frame), by arithmetic from the model's dims ([`param_counts`], the
//! configs' `dim`, `ffn_dim`, `num_layers`) and the packed layout: what `bench train` (Phase 1)
//! and `bench dmd` (Phase 2) print after their timings, for each precision, checkpointing and
//! device count, with the verdict against an 80 GB GPU.
//!
//! Per device, one clip per device (data parallel replicates the model: more devices do not
//! shrink a device's share unless the weights and their optimizer state are sharded):
//!
//! * Frozen weights in the training dtype (f32: 4 bytes, bf16: 2).
//! * Trained parameters: f32 gradient, two f32 AdamW moments (Burn keeps the first even at
//!   β₁ = 0), f32 EMA, 16 bytes; f32 weights (4), or in bf16 a bf16 working copy beside the f32
//!   master (2 + 4).
//! * Activations saved for backward, per layer with `N` tokens: ≈ 33 `[N, dim]` + 2 `[N, ffn]`
//!   elements in the activation dtype (13 in self-attention, 12 role-masked LoRA deltas, 5 in
//!   cross-attention, 3 around the FFN; the FFN hidden before and after GELU); attention on the
//!   flash kernels keeps no scores. Checkpointing per block keeps each layer's input `[N, dim]`
//!   and recomputes one layer at a time.
//! * Phase 1: the packed time-rebased clip of L = 81 (`SftObjective::layout`).
//! * Phase 2: student (every parameter trains), critic (LoRA rank 256 on a frozen 1.3B base),
//!   teacher (14B, frozen). The generator step holds the exit-stage renderer's activations over
//!   81 positions, the anchor bank's K/V and one teacher layer's transient; the critic step its
//!   activations over a 21-frame window. The peak is the larger step.
//!
//! Sharded: weights, gradients and optimizer state split over the N devices (ZeRO-3 / FSDP),
//! activations not. A configuration whose activations alone exceed the GPU needs context
//! parallelism (splitting the tokens of a clip over devices).

use super::{gib, param_counts};
use ff_model::DitConfig;
use ff_train::sft::{SftConfig, SftObjective};

/// Usable memory of an 80 GB GPU (an H100 80GB reports 79.6 GiB; the CUDA context and the
/// allocator's slack take about 1.5 GiB).
const BUDGET: u64 = 78 << 30;
/// Latent height and width at 480p.
const LATENTS: (usize, usize) = (60, 104);
/// LoRA rank of the roles and of the critic (paper, 1.3B).
const RANK: usize = 256;

/// One configuration's per-device bytes.
struct Row {
    bf16: bool,
    checkpointing: bool,
    devices: u64,
    /// Weights and optimizer state (shardable).
    states: u64,
    /// Activations and transients of the peak step (not shardable).
    activations: u64,
}

impl Row {
    fn verdict(&self) -> String {
        if self.states + self.activations <= BUDGET {
            "fits".into()
        } else if self.activations > BUDGET {
            "needs context parallelism (activations alone exceed the GPU)".into()
        } else if self.states / self.devices + self.activations <= BUDGET {
            format!("needs sharding over the {} devices", self.devices)
        } else {
            "needs sharding over more devices".into()
        }
    }
}

/// Activation bytes of one layer over `n` tokens of width `d`, FFN width `f`.
fn layer(n: u64, d: u64, f: u64, bytes: u64) -> u64 {
    (33 * n * d + 2 * n * f) * bytes
}

/// Saved activations of a `layers`-layer pass over `n` tokens, with or without checkpointing.
fn pass(c: &DitConfig, n: u64, bytes: u64, checkpointing: bool) -> u64 {
    let (d, f, layers) = (c.dim as u64, c.ffn_dim as u64, c.num_layers as u64);
    match checkpointing {
        true => layers * n * d * bytes + layer(n, d, f, bytes),
        false => layers * layer(n, d, f, bytes),
    }
}

/// Bytes per trained parameter: weights (f32, or bf16 copy + f32 master) + gradient, moments, EMA.
fn trained(bf16: bool) -> u64 {
    if bf16 { 2 + 4 + 16 } else { 4 + 16 }
}

fn tokens_per_frame(c: &DitConfig) -> u64 {
    let [_, ph, pw] = c.patch_size;
    ((LATENTS.0 / ph) * (LATENTS.1 / pw)) as u64
}

/// Phase 1 at `bf16`, `checkpointing`, `devices`; and the packed frames.
fn phase1(bf16: bool, checkpointing: bool, devices: u64) -> anyhow::Result<(Row, usize)> {
    let c = DitConfig::wan_t2v_1_3b();
    let frames = SftObjective::new(SftConfig::new())?.layout(&[1, 4, 6, 9]).len();
    let (backbone, roles) = param_counts(&c, RANK);
    let bytes = if bf16 { 2 } else { 4 };
    let states = backbone as u64 * bytes + roles as u64 * trained(bf16);
    let activations = pass(&c, frames as u64 * tokens_per_frame(&c), bytes, checkpointing);
    Ok((Row { bf16, checkpointing, devices, states, activations }, frames))
}

/// Phase 2 at `bf16`, `checkpointing`, `devices`.
fn phase2(bf16: bool, checkpointing: bool, devices: u64) -> Row {
    let (c, teacher) = (DitConfig::wan_t2v_1_3b(), DitConfig::wan_t2v_14b());
    let (backbone, roles) = param_counts(&c, RANK);
    let (backbone, roles, b14) = (backbone as u64, roles as u64, param_counts(&teacher, RANK).0 as u64);
    let bytes = if bf16 { 2 } else { 4 };
    let states = (backbone + roles) * trained(bf16) + backbone * bytes + roles * trained(bf16) + b14 * bytes;
    let per_frame = tokens_per_frame(&c);
    let (d, layers) = (c.dim as u64, c.num_layers as u64);
    let bank = 9 * per_frame * layers * 2 * d * bytes;
    let window = 21 * per_frame;
    let teacher_layer = layer(window, teacher.dim as u64, teacher.ffn_dim as u64, bytes);
    let generator = pass(&c, 81 * per_frame, bytes, checkpointing) + bank + teacher_layer;
    let critic = pass(&c, window, bytes, checkpointing);
    Row { bf16, checkpointing, devices, states, activations: generator.max(critic) }
}

/// Every configuration of one phase.
fn rows(phase: impl Fn(bool, bool, u64) -> anyhow::Result<Row>) -> anyhow::Result<Vec<Row>> {
    let mut rows = Vec::new();
    for bf16 in [false, true] {
        for checkpointing in [false, true] {
            for devices in [1, 8, 64] {
                rows.push(phase(bf16, checkpointing, devices)?);
            }
        }
    }
    Ok(rows)
}

fn print(title: &str, rows: &[Row]) {
    println!("\n{title}");
    println!(
        "| precision | checkpointing | devices | weights + optimizer state | activations | total, replicated | total, sharded over the devices | on an 80 GB GPU |"
    );
    println!("| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |");
    for r in rows {
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            if r.bf16 { "bf16" } else { "f32" },
            if r.checkpointing { "blocks" } else { "none" },
            r.devices,
            gib(r.states),
            gib(r.activations),
            gib(r.states + r.activations),
            gib(r.states / r.devices + r.activations),
            r.verdict()
        );
    }
}

/// Prints the Phase 1 plan (`bench train`).
pub fn print_phase1() -> anyhow::Result<()> {
    let frames = phase1(false, false, 1)?.1;
    let rows = rows(|b, k, n| Ok(phase1(b, k, n)?.0))?;
    let c = DitConfig::wan_t2v_1_3b();
    let title = format!(
        "memory plan per device, Phase 1 at 1.3B / 480p: L = 81 packed into {frames} frames × {} tokens, LoRA rank {RANK} on the roles, one clip per device; budget {} of an 80 GB GPU",
        tokens_per_frame(&c),
        gib(BUDGET)
    );
    print(&title, &rows);
    Ok(())
}

/// Prints the Phase 2 plan (`bench dmd`).
pub fn print_phase2() -> anyhow::Result<()> {
    let rows = rows(|b, k, n| Ok(phase2(b, k, n)))?;
    let title = format!(
        "memory plan per device, Phase 2 at 1.3B / 480p: student (all parameters train), critic (LoRA rank {RANK}), 14B teacher (frozen), L = 81, one clip per device; budget {} of an 80 GB GPU",
        gib(BUDGET)
    );
    print(&title, &rows);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_follows_the_dims() {
        // Phase 1 f32, no checkpointing: 30 layers × (33·N·1536 + 2·N·8960) × 4 bytes.
        let (row, frames) = phase1(false, false, 1).unwrap();
        let n = (frames * 30 * 52) as u64;
        assert_eq!(row.activations, 30 * (33 * n * 1536 + 2 * n * 8960) * 4);
        // bf16 halves the activations; checkpointing keeps the layer inputs and one layer.
        let half = phase1(true, false, 1).unwrap().0;
        assert_eq!(half.activations * 2, row.activations);
        let blocks = phase1(true, true, 1).unwrap().0;
        assert_eq!(blocks.activations, 30 * n * 1536 * 2 + (33 * n * 1536 + 2 * n * 8960) * 2);
        assert!(blocks.activations * 10 < half.activations);
        // Sharding divides the states only.
        let sharded = phase2(true, true, 8);
        assert_eq!(sharded.activations, phase2(true, true, 1).activations);
        assert!(phase2(false, false, 1).verdict().contains("context parallelism"));
    }
}
