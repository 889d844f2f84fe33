//! [`TrainRng`]: the training run's random stream, the workspace's one generator
//! ([`ff_rng::Rng`], SplitMix64) with the tensor draws training needs. Its state is one `u64`, so
//! a checkpoint saves and restores it exactly (`{"state": N}`, unchanged from before the
//! generator moved to `ff-rng`). Noise is drawn on the host, so every backend and every
//! data-parallel layout sees the same numbers.

use burn::tensor::TensorData;
use serde::{Deserialize, Serialize};

/// The run's stream; [`ff_rng::Rng`]'s methods through `Deref`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TrainRng(ff_rng::Rng);

impl TrainRng {
    /// The stream of `seed`.
    pub fn new(seed: u64) -> Self {
        Self(ff_rng::Rng::new(seed))
    }

    /// An independent stream derived from this one and `stream` (see [`ff_rng::Rng::fork`]).
    pub fn fork(&self, stream: u64) -> Self {
        Self(self.0.fork(stream))
    }

    /// A host tensor of standard normal f32 values.
    pub fn normal_data(&mut self, shape: Vec<usize>) -> TensorData {
        let n = shape.iter().product();
        let v: Vec<f32> = (0..n).map(|_| self.0.normal() as f32).collect();
        TensorData::new(v, shape)
    }
}

impl std::ops::Deref for TrainRng {
    type Target = ff_rng::Rng;
    fn deref(&self) -> &ff_rng::Rng {
        &self.0
    }
}

impl std::ops::DerefMut for TrainRng {
    fn deref_mut(&mut self) -> &mut ff_rng::Rng {
        &mut self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The stream training drew before its generator moved into `ff-rng`: the first values of
    /// seed 3 and of its fork 1, as the previous hand-written SplitMix64 gave them (recomputed
    /// from that code by an independent Python transcription), and its checkpoint form.
    #[test]
    fn the_stream_is_the_one_checkpoints_were_written_with() {
        let mut r = TrainRng::new(3);
        assert_eq!(serde_json::to_string(&r).unwrap(), r#"{"state":3}"#);
        assert_eq!(r.fork(1).next_u64(), 14_390_152_515_629_487_779);
        assert_eq!([r.next_u64(), r.next_u64()], [2_092_789_425_003_139_053, 12_918_135_221_727_111_561]);
        let xs: Vec<f64> = (0..20_000).map(|_| r.normal()).collect();
        let mean = xs.iter().sum::<f64>() / xs.len() as f64;
        assert!(mean.abs() < 0.03, "mean {mean}");
    }
}
