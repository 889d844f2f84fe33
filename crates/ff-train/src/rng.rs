//! [`TrainRng`]: the training run's random stream (SplitMix64), a single `u64` of state so a
//! checkpoint saves and restores it exactly. Noise is drawn on the host, so every backend and
//! every data-parallel layout sees the same numbers.

use burn::tensor::TensorData;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrainRng {
    state: u64,
}

impl TrainRng {
    pub fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    /// An independent stream derived from this one's seed state and `stream` (e.g. a worker or
    /// clip index), leaving this one untouched.
    pub fn fork(&self, stream: u64) -> Self {
        let mut s = Self { state: self.state ^ stream.wrapping_mul(0xA076_1D64_78BD_642F) };
        Self { state: s.next_u64() }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform integer in `0..n` (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// Standard normal (Box–Muller).
    pub fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.uniform();
        let u2 = self.uniform();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    /// A host tensor of standard normal f32 values.
    pub fn normal_data(&mut self, shape: Vec<usize>) -> TensorData {
        let n = shape.iter().product();
        let v: Vec<f32> = (0..n).map(|_| self.normal() as f32).collect();
        TensorData::new(v, shape)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normal_moments_and_reproducible_forks() {
        let mut r = TrainRng::new(3);
        let xs: Vec<f64> = (0..20_000).map(|_| r.normal()).collect();
        let mean = xs.iter().sum::<f64>() / xs.len() as f64;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / xs.len() as f64;
        assert!(mean.abs() < 0.03 && (var - 1.0).abs() < 0.05, "mean {mean} var {var}");
        let base = TrainRng::new(9);
        assert_eq!(base.fork(1).next_u64(), base.fork(1).next_u64());
        assert_ne!(base.fork(1).next_u64(), base.fork(2).next_u64());
    }
}
