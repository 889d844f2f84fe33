//! T5 layer norm: RMS normalisation with a learned scale, no mean subtraction and no bias,
//! computed in f32 whatever the backend's float dtype.
//!
//! `y = weight * x / sqrt(mean(x², last dim) + eps)`; `[..., d_model]` in and out.

use burn::config::Config;
use burn::module::{Module, Param};
use burn::tensor::{DType, Tensor, backend::Backend};

/// Configuration of [`T5LayerNorm`].
#[derive(Config, Debug)]
pub struct T5LayerNormConfig {
    /// Channels normalised (the last dimension).
    pub d_model: usize,
    /// Added to the mean square before the root.
    #[config(default = 1e-6)]
    pub epsilon: f64,
}

impl T5LayerNormConfig {
    /// A norm with unit scale.
    pub fn init<B: Backend>(&self, device: &B::Device) -> T5LayerNorm<B> {
        T5LayerNorm { weight: Param::from_tensor(Tensor::ones([self.d_model], device)), epsilon: self.epsilon }
    }
}

/// T5's RMS layer norm (checkpoint key `*.weight`).
#[derive(Module, Debug)]
pub struct T5LayerNorm<B: Backend> {
    /// Per-channel scale `[d_model]`.
    pub weight: Param<Tensor<B, 1>>,
    /// Added to the mean square before the root.
    pub epsilon: f64,
}

impl<B: Backend> T5LayerNorm<B> {
    /// `[..., d_model]` -> `[..., d_model]`, in the input's dtype.
    pub fn forward<const D: usize>(&self, x: Tensor<B, D>) -> Tensor<B, D> {
        let dtype = x.dtype();
        let x = x.cast(DType::F32);
        let inv_rms = (x.clone().square().mean_dim(D - 1) + self.epsilon).sqrt().recip();
        (x * inv_rms).cast(dtype) * self.weight.val().unsqueeze()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::NdArray;
    use burn::tensor::TensorData;

    #[test]
    fn normalises_by_root_mean_square_without_centering() {
        let device = Default::default();
        let mut norm = T5LayerNormConfig::new(4).with_epsilon(0.0).init::<NdArray>(&device);
        norm.weight = Param::from_tensor(Tensor::from_floats([1.0, 2.0, 1.0, 0.5], &device));
        // rms of [1, 3, 5, 7] = sqrt(84 / 4) = sqrt(21); the mean (4) is kept.
        let x = Tensor::<NdArray, 2>::from_floats([[1.0, 3.0, 5.0, 7.0]], &device);
        let r = 21f32.sqrt();
        let want = TensorData::from([[1.0 / r, 6.0 / r, 5.0 / r, 3.5 / r]]);
        norm.forward(x).into_data().assert_approx_eq::<f32>(&want, burn::tensor::Tolerance::absolute(1e-6));
    }
}
