//! Counter-based Gaussian noise: the value of every element is a pure function of
//! (seed, stream, frame position, noise level, element), so it does not depend on which worker
//! draws it, in which order, or how frames are grouped into forwards.
//!
//! Hash: `ff_rng::mix` (SplitMix64) chained over the key; normals by `ff_rng::normal_at`
//! (Box–Muller in f64), stored as f32.

use burn::tensor::{Tensor, TensorData, backend::Backend};
use ff_rng::mix;

/// Noise stream of the output (renderer and baselines).
pub const OUTPUT_STREAM: u64 = 0;
/// Noise stream of the planner's anchor latents.
pub const PLANNER_STREAM: u64 = 1;

/// Seed and per-frame latent shape of a generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoiseSpec {
    /// The generation's seed.
    pub seed: u64,
    /// Latent channels.
    pub channels: usize,
    /// Latent frame height (latent pixels).
    pub height: usize,
    /// Latent frame width (latent pixels).
    pub width: usize,
}

impl NoiseSpec {
    /// ε for latent frames at `positions` and noise `level`: `[1, channels, frames, height, width]`.
    pub fn sample<B: Backend>(&self, stream: u64, positions: &[usize], level: usize, device: &B::Device) -> Tensor<B, 5> {
        let (c, f, hw) = (self.channels, positions.len(), self.height * self.width);
        let mut data = vec![0f32; c * f * hw];
        for (fi, &p) in positions.iter().enumerate() {
            let key = mix(mix(mix(mix(self.seed) ^ stream) ^ p as u64) ^ level as u64);
            for ch in 0..c {
                for e in 0..hw {
                    data[(ch * f + fi) * hw + e] = normal(key, (ch * hw + e) as u64);
                }
            }
        }
        Tensor::from_data(TensorData::new(data, [1, c, f, self.height, self.width]), device)
    }
}

/// Standard normal number `index` of the stream `key`, as f32.
fn normal(key: u64, index: u64) -> f32 {
    ff_rng::normal_at(key, index) as f32
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::NdArray;

    fn spec() -> NoiseSpec {
        NoiseSpec { seed: 7, channels: 4, height: 4, width: 4 }
    }

    #[test]
    fn frames_do_not_depend_on_grouping() {
        let dev = Default::default();
        let whole = spec().sample::<NdArray>(0, &[3, 4, 5], 1, &dev);
        let middle = spec().sample::<NdArray>(0, &[4], 1, &dev);
        let d: f32 = (whole.narrow(2, 1, 1) - middle).abs().max().into_scalar();
        assert_eq!(d, 0.0);
    }

    #[test]
    fn streams_levels_and_seeds_differ_and_look_standard_normal() {
        let dev = Default::default();
        let a = spec().sample::<NdArray>(0, &[0], 0, &dev);
        for other in [
            spec().sample::<NdArray>(1, &[0], 0, &dev),
            spec().sample::<NdArray>(0, &[0], 1, &dev),
            NoiseSpec { seed: 8, ..spec() }.sample::<NdArray>(0, &[0], 0, &dev),
        ] {
            let d: f32 = (a.clone() - other).abs().max().into_scalar();
            assert!(d > 0.1);
        }
        let big = NoiseSpec { seed: 1, channels: 16, height: 32, width: 32 }.sample::<NdArray>(0, &[0, 1], 0, &dev);
        let mean: f32 = big.clone().mean().into_scalar();
        let var: f32 = (big.clone() * big).mean().into_scalar();
        assert!(mean.abs() < 0.05, "mean {mean}");
        assert!((var - 1.0).abs() < 0.05, "var {var}");
    }
}
