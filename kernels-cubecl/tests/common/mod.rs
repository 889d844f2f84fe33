//! Shared helpers of the kernel tests: deterministic inputs, random block tables, the reference
//! (the blockwise path) and the error measure.

#![allow(dead_code, unused_imports)]

use burn::tensor::TensorData;
use kernels_cubecl::BlockTable;

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

/// `max |a − b| / max |b|` over all elements.
pub fn rel_err(a: &TensorData, b: &TensorData) -> f32 {
    let (a, b) = (a.to_vec::<f32>().unwrap(), b.to_vec::<f32>().unwrap());
    assert_eq!(a.len(), b.len(), "shapes differ");
    let diff = a.iter().zip(&b).map(|(x, y)| (x - y).abs()).fold(0.0f32, f32::max);
    let scale = b.iter().map(|y| y.abs()).fold(0.0f32, f32::max);
    assert!(scale > 0.0, "reference is all zeros");
    diff / scale
}
