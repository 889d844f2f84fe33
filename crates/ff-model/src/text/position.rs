//! umT5 relative position bias: every encoder block owns a table `[num_buckets, num_heads]`
//! indexed by the bidirectional bucket of `key_pos - query_pos`; the output `[1, heads, L, L]` is
//! added to the attention logits.
//!
//! Buckets: half of them per direction (positive offsets use the upper half); within a half,
//! offsets below `half / 2` get their own bucket and larger ones share log-spaced buckets up to
//! `max_distance`. The log is taken in f32 exactly as transformers and Wan do, so that bucket
//! boundaries agree.

use burn::config::Config;
use burn::module::Module;
use burn::nn::{Embedding, EmbeddingConfig};
use burn::tensor::{DType, Int, Tensor, TensorData, backend::Backend};

/// Configuration of [`RelativePositionBias`].
#[derive(Config, Debug)]
pub struct RelativePositionBiasConfig {
    /// Buckets, both directions together.
    pub num_buckets: usize,
    /// Attention heads (one bias per head).
    pub num_heads: usize,
    /// Offset from which every larger offset shares the last bucket of its direction.
    pub max_distance: usize,
}

impl RelativePositionBiasConfig {
    /// A freshly initialised bias table.
    pub fn init<B: Backend>(&self, device: &B::Device) -> RelativePositionBias<B> {
        RelativePositionBias {
            embedding: EmbeddingConfig::new(self.num_buckets, self.num_heads).init(device),
            num_buckets: self.num_buckets,
            max_distance: self.max_distance,
        }
    }
}

/// Per-block relative position bias (checkpoint key `*.embedding.weight`, `[buckets, heads]`).
#[derive(Module, Debug)]
pub struct RelativePositionBias<B: Backend> {
    /// The bias table `[num_buckets, num_heads]`.
    pub embedding: Embedding<B>,
    /// Buckets, both directions together.
    pub num_buckets: usize,
    /// Offset from which every larger offset shares the last bucket of its direction.
    pub max_distance: usize,
}

impl<B: Backend> RelativePositionBias<B> {
    /// The bias for a sequence of `len` tokens: `[1, heads, len, len]`, in f32.
    pub fn forward(&self, len: usize, device: &B::Device) -> Tensor<B, 4> {
        let buckets: Vec<i64> = (0..len as i64)
            .flat_map(|q| (0..len as i64).map(move |k| (q, k)))
            .map(|(q, k)| bidirectional_bucket(k - q, self.num_buckets, self.max_distance))
            .collect();
        let buckets = Tensor::<B, 2, Int>::from_data(TensorData::new(buckets, [len, len]), device);
        self.embedding.forward(buckets).permute([2, 0, 1]).unsqueeze::<4>().cast(DType::F32)
    }
}

/// The bucket of a relative position `key - query` (bidirectional T5 bucketing).
pub fn bidirectional_bucket(relative: i64, num_buckets: usize, max_distance: usize) -> i64 {
    let half = (num_buckets / 2) as i64;
    let offset = if relative > 0 { half } else { 0 };
    let distance = relative.abs();
    let max_exact = half / 2;
    if distance < max_exact {
        return offset + distance;
    }
    let log_ratio = (distance as f32 / max_exact as f32).ln() / ((max_distance as f64 / max_exact as f64).ln() as f32);
    let large = max_exact + (log_ratio * (half - max_exact) as f32) as i64;
    offset + large.min(half - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_match_t5_reference_values() {
        // 32 buckets, max distance 128 (umT5): 16 per direction, 8 exact, log-spaced up to 128.
        // Expected buckets worked out by hand from the T5 formula (d >= 8): 8 + floor(8 ln(d/8) / ln 16).
        let cases = [
            (0, 0),
            (-1, 1),
            (1, 17),
            (-7, 7),
            (7, 23),
            (-8, 8),
            (8, 24),
            (-15, 9),
            (-16, 10),
            (-31, 11),
            (-32, 12),
            (-63, 13),
            (-64, 14),
            (-127, 15),
            (-128, 15),
            (-1000, 15),
            (1000, 31),
            (16, 26),
        ];
        for (rel, want) in cases {
            assert_eq!(bidirectional_bucket(rel, 32, 128), want, "relative position {rel}");
        }
    }

    #[test]
    fn bias_is_toeplitz_over_heads() {
        type B = burn::backend::NdArray;
        let device = Default::default();
        let bias = RelativePositionBiasConfig::new(32, 3, 128).init::<B>(&device);
        let table = bias.embedding.weight.val().into_data().to_vec::<f32>().unwrap();
        let out = bias.forward(5, &device);
        assert_eq!(out.dims(), [1, 3, 5, 5]);
        let out = out.into_data().to_vec::<f32>().unwrap();
        for h in 0..3 {
            for q in 0..5i64 {
                for k in 0..5i64 {
                    let bucket = bidirectional_bucket(k - q, 32, 128) as usize;
                    assert_eq!(out[h * 25 + q as usize * 5 + k as usize], table[bucket * 3 + h]);
                }
            }
        }
    }
}
