//! Embeddings of the DiT: sinusoidal timestep features (host, f64), the two-layer MLPs of the time
//! and text paths, and the patch embedding (a stride = kernel Conv3d, run as one matmul).

use burn::module::Module;
use burn::nn::conv::{Conv3d, Conv3dConfig};
use burn::nn::{Linear, LinearConfig};
use burn::tensor::module::linear;
use burn::tensor::{DType, Tensor, TensorData, backend::Backend};

/// Sinusoidal features `[cos(t·ω_j) | sin(t·ω_j)]`, `ω_j = 10000^(−j/half)`, for each timestep:
/// a row-major `[timesteps.len(), dim]` table. The angle `t·ω_j` is formed in f32 exactly as the
/// diffusers reference does (the parity fixtures pin it: forming it in f64 as Wan's original code
/// does moves the tiny model's output by 2e-5 relative), and its cosine and sine in f64.
pub fn sinusoidal(timesteps: &[f64], dim: usize) -> Vec<f32> {
    let half = dim / 2;
    let mut out = Vec::with_capacity(timesteps.len() * dim);
    for &t in timesteps {
        let angle = |j: usize| f64::from((t as f32) * (-(10000f32.ln()) * j as f32 / half as f32).exp());
        out.extend((0..half).map(|j| angle(j).cos() as f32));
        out.extend((0..half).map(|j| angle(j).sin() as f32));
    }
    out
}

/// `fc2(act(fc1(x)))`: the time embedding (SiLU) and the text embedding (GELU, tanh).
#[derive(Module, Debug)]
pub struct Mlp<B: Backend> {
    /// First layer `d_in → d_hidden`.
    pub fc1: Linear<B>,
    /// Second layer `d_hidden → d_out`.
    pub fc2: Linear<B>,
}

impl<B: Backend> Mlp<B> {
    /// A freshly initialised `d_in → d_hidden → d_out` MLP.
    pub fn new(d_in: usize, d_hidden: usize, d_out: usize, device: &B::Device) -> Self {
        Self { fc1: LinearConfig::new(d_in, d_hidden).init(device), fc2: LinearConfig::new(d_hidden, d_out).init(device) }
    }

    /// `fc2(act(fc1(x)))` over the last dimension of `x: [..., d_in]` → `[..., d_out]`.
    pub fn forward<const D: usize>(&self, x: Tensor<B, D>, act: impl Fn(Tensor<B, D>) -> Tensor<B, D>) -> Tensor<B, D> {
        self.fc2.forward(act(self.fc1.forward(x)))
    }

    /// [`Mlp::forward`] in f32 whatever the parameters' dtype (the time embedding).
    pub fn forward_f32<const D: usize>(&self, x: Tensor<B, D>, act: impl Fn(Tensor<B, D>) -> Tensor<B, D>) -> Tensor<B, D> {
        linear_f32(&self.fc2, act(linear_f32(&self.fc1, x)))
    }
}

/// `linear.forward(x)` computed in f32 (input, weight and bias cast), returned in f32.
pub fn linear_f32<B: Backend, const D: usize>(linear_layer: &Linear<B>, x: Tensor<B, D>) -> Tensor<B, D> {
    let bias = linear_layer.bias.as_ref().map(|b| b.val().cast(DType::F32));
    linear(x.cast(DType::F32), linear_layer.weight.val().cast(DType::F32), bias)
}

/// Patch embedding: `[batch, C, F, H, W]` → tokens `[batch, F/pt·H/ph·W/pw, dim]` in (f, h, w)
/// order. Stored as Wan's Conv3d (`[dim, C, pt, ph, pw]`), computed as one matmul.
#[derive(Module, Debug)]
pub struct PatchEmbed<B: Backend> {
    /// Wan's Conv3d, kernel = stride = patch `[pt, ph, pw]`; weight `[dim, C, pt, ph, pw]`.
    pub conv: Conv3d<B>,
}

impl<B: Backend> PatchEmbed<B> {
    /// A fresh embedding of `in_channels` latent channels into `dim` by `patch = [pt, ph, pw]`.
    pub fn new(in_channels: usize, dim: usize, patch: [usize; 3], device: &B::Device) -> Self {
        let conv = Conv3dConfig::new([in_channels, dim], patch).with_stride(patch).init(device);
        Self { conv }
    }

    /// `x: [batch, C, F, H, W]` → tokens `[batch, F/pt·H/ph·W/pw, dim]` in (f, h, w) order.
    pub fn forward(&self, x: Tensor<B, 5>) -> Tensor<B, 3> {
        let [b, c, f, h, w] = x.dims();
        let [pt, ph, pw] = self.conv.kernel_size;
        let (fp, hp, wp) = (f / pt, h / ph, w / pw);
        let k = c * pt * ph * pw;
        let weight = self.conv.weight.val();
        let dim = weight.dims()[0];
        // NdArray handles up to 6 dimensions: split the patch gather in two permutes.
        let patches = x
            .reshape([b * c * fp, pt, hp, ph, wp, pw])
            .permute([0, 2, 4, 1, 3, 5])
            .reshape([b, c, fp, hp * wp, pt * ph * pw])
            .permute([0, 2, 3, 1, 4])
            .reshape([b, fp * hp * wp, k]);
        let y = patches.matmul(weight.reshape([dim, k]).transpose().unsqueeze());
        match &self.conv.bias {
            Some(bias) => y + bias.val().unsqueeze::<3>(),
            None => y,
        }
    }
}

/// Builds a `[batch, frames, dim]` tensor of sinusoidal features for per-frame timesteps.
pub fn timestep_features<B: Backend>(timesteps: &[Vec<f64>], dim: usize, device: &B::Device) -> Tensor<B, 3> {
    let (b, f) = (timesteps.len(), timesteps.first().map_or(0, Vec::len));
    let flat: Vec<f64> = timesteps.iter().flatten().copied().collect();
    Tensor::from_data(TensorData::new(sinusoidal(&flat, dim), [b, f, dim]), device)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sinusoid_has_cos_then_sin_halves() {
        let e = sinusoidal(&[0.0, 1.0], 4);
        assert_eq!(&e[..4], &[1.0, 1.0, 0.0, 0.0]);
        // t = 1: ω = [1, 10000^-0.5]
        assert!((e[4] - 1f64.cos() as f32).abs() < 1e-7);
        assert!((e[5] - 0.01f64.cos() as f32).abs() < 1e-7);
        assert!((e[6] - 1f64.sin() as f32).abs() < 1e-7);
        assert!((e[7] - 0.01f64.sin() as f32).abs() < 1e-7);
    }
}
