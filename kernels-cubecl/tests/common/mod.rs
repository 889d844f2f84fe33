//! Shared helpers of the kernel tests: deterministic inputs, random block tables, the reference
//! (the blockwise path), gradients of a weighted sum and the error measure.

#![allow(dead_code, unused_imports)]

use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{Tensor, TensorData};
use kernels_cubecl::{AttentionBackend, BlockTable, kernel_attention};

/// Deterministic generator (64-bit LCG), so NdArray and wgpu see identical inputs.
pub struct Lcg(pub u64);

impl Lcg {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        self.0 >> 33
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// Uniform in [-1, 1).
    pub fn unit(&mut self) -> f32 {
        (self.next() % 2_000_001) as f32 / 1_000_000.0 - 1.0
    }

    pub fn data(&mut self, shape: [usize; 4], scale: f32) -> TensorData {
        let n = shape.iter().product();
        TensorData::new((0..n).map(|_| self.unit() * scale).collect::<Vec<f32>>(), shape)
    }
}

/// A random table: ragged frames (1..=max_tokens tokens), every query frame sees a random
/// non-empty set of key frames; some rows see exactly one frame.
pub fn random_table(rng: &mut Lcg, q_frames: usize, k_frames: usize, max_tokens: usize) -> BlockTable {
    let qt: Vec<usize> = (0..q_frames).map(|_| 1 + rng.below(max_tokens)).collect();
    let kt: Vec<usize> = (0..k_frames).map(|_| 1 + rng.below(max_tokens)).collect();
    let rules: Vec<Vec<usize>> = (0..q_frames)
        .map(|_| match rng.below(4) {
            0 => vec![rng.below(k_frames)],
            _ => {
                let keep: Vec<usize> = (0..k_frames).filter(|_| rng.below(2) == 0).collect();
                if keep.is_empty() { vec![rng.below(k_frames)] } else { keep }
            }
        })
        .collect();
    BlockTable::from_rules(&qt, &kt, |q| rules[q].clone())
}

/// The reference: the portable blockwise path.
pub use kernels_cubecl::blockwise::attention as reference;

/// Attention inputs of one case.
pub struct Inputs {
    pub q: TensorData,
    pub k: TensorData,
    pub v: TensorData,
    /// Weights of the scalar loss `sum(out * w)` whose gradients are compared.
    pub w: TensorData,
}

pub fn inputs(table: &BlockTable, batch: usize, heads: usize, dim: usize, seed: u64) -> Inputs {
    let (nq, nk) = table.tokens();
    let mut rng = Lcg(seed);
    Inputs {
        q: rng.data([batch, heads, nq, dim], 1.5),
        k: rng.data([batch, heads, nk, dim], 1.5),
        v: rng.data([batch, heads, nk, dim], 1.0),
        w: rng.data([batch, heads, nq, dim], 1.0),
    }
}

pub fn load<B: Backend>(x: &Inputs, dev: &B::Device) -> [Tensor<B, 4>; 3] {
    [x.q.clone(), x.k.clone(), x.v.clone()].map(|d| Tensor::from_data(d, dev))
}

/// `out` and the gradients of `sum(out * w)` with respect to q, k, v, with `out` from the kernel
/// (`kernel`) or the reference.
pub fn forward_backward<B: AutodiffBackend + AttentionBackend>(
    table: &BlockTable,
    x: &Inputs,
    kernel: bool,
    dev: &B::Device,
) -> [TensorData; 4] {
    let [q, k, v] = load::<B>(x, dev).map(|t| t.require_grad());
    let out = match kernel {
        true => kernel_attention(q.clone(), k.clone(), v.clone(), table).expect("the backend has the kernel"),
        false => reference(q.clone(), k.clone(), v.clone(), table),
    };
    let g = (out.clone() * Tensor::from_data(x.w.clone(), dev)).sum().backward();
    let [dq, dk, dv] = [&q, &k, &v].map(|t| t.grad(&g).expect("input takes part in the loss").into_data());
    [out.into_data(), dq, dk, dv]
}

/// The gradients of [`forward_backward`].
pub fn grads<B: AutodiffBackend + AttentionBackend>(table: &BlockTable, x: &Inputs, kernel: bool, dev: &B::Device) -> [TensorData; 3] {
    let [_, dq, dk, dv] = forward_backward::<B>(table, x, kernel, dev);
    [dq, dk, dv]
}

/// `max |a − b| / max |b|` over all elements.
pub fn rel_err(a: &TensorData, b: &TensorData) -> f32 {
    let (a, b) = (a.to_vec::<f32>().unwrap(), b.to_vec::<f32>().unwrap());
    assert_eq!(a.len(), b.len(), "shapes differ");
    let diff = a.iter().zip(&b).map(|(x, y)| (x - y).abs()).fold(0.0f32, f32::max);
    let scale = b.iter().map(|y| y.abs()).fold(0.0f32, f32::max);
    assert!(scale > 0.0, "reference is all zeros");
    diff / scale
}
