//! The codec's starting point: its initial posterior width, and the inflation of an image codec
//! into a video codec.
//!
//! A freshly initialised Wan VAE outputs log-variances near 0, so the sampled latent
//! `z = μ + σ·ε` starts with σ ≈ 1: noise as large as any signal the random encoder sends. The
//! decoder then learns from latents that carry almost nothing (measured: KL ≈ 0.1–0.2 nats per
//! element over the first 200 steps, training MSE stuck near 0.15), and the encoder needs
//! hundreds of steps to push σ down before reconstruction can sharpen. Starting the
//! log-variance channels of `quant_conv` at a negative bias (σ = e^{logvar/2}) opens the channel
//! from the first step; the KL term still pulls σ towards 1 at its usual weight.

use crate::engine::Trainable;
use burn::module::{Module, ModuleMapper, Param};
use burn::tensor::{Tensor, TensorData, backend::Backend};
use ff_model::vae::WanVae;

/// `vae` with the bias of the log-variance half of `quant_conv`'s output (channels
/// `z_dim..2·z_dim`) set to `logvar`; the mean half and every weight are unchanged.
pub fn with_initial_logvar<B: Backend>(mut vae: WanVae<B>, logvar: f64) -> WanVae<B> {
    let z = vae.config().z_dim;
    vae.quant_conv.bias = vae.quant_conv.bias.map(|bias| {
        let device = bias.device();
        let mean = bias.narrow(0, 0, z);
        Tensor::cat(vec![mean, Tensor::full([z], logvar, &device)], 0)
    });
    vae
}

/// `vae`, a codec trained on single frames, made a video codec that starts where the image
/// codec stands: each frame is coded as the image codec codes it alone.
///
/// Trained on one frame at a time, a causal convolution only ever saw its current-frame tap (the
/// two past taps multiplied the zero padding, so they kept their random initial values), and the
/// temporal resampling convolutions never ran. On clips those untrained weights mix noise into
/// every frame after the first (measured in diffusers on this domain: 8.8 dB before any video
/// step, against the image codec's 25 dB on the same frames once inflated). Inflating, like
/// I3D's inflation of 2-D filters:
/// * every `(3, kh, kw)` causal convolution keeps its current-frame tap and zeroes its two past
///   taps;
/// * the encoder's stride-2 time convolutions (`Downsample3d`, input `[previous, x]`) pass their
///   window's latest frame: identity on the last tap, zero elsewhere and zero bias;
/// * the decoder's time convolutions (`Upsample3d`, `C → 2C` channels that become two frames)
///   copy the current frame into both halves: nearest-neighbour upsampling in time.
///
/// The latent of each 4-frame chunk is then the image latent of its last frame, and the decoder
/// repeats it four times; video training starts from there.
///
/// Only the parameters `part` selects are inflated: [`Trainable::Decoder`] turns a decoder
/// trained on single frames of a frozen video encoder into a video decoder and leaves that
/// encoder's trained temporal taps alone.
pub fn inflate_time<B: Backend>(vae: WanVae<B>, part: Trainable) -> WanVae<B> {
    vae.map(&mut TimeSurgery { path: Vec::new(), part, kind: Surgery::Inflate })
}

/// `vae` with each decoder time upsampling (`Upsample3d`: `C → 2C` channels that become two
/// frames, the earlier from the first half) made to interpolate: the earlier frame's half now
/// outputs the mean of what it output for the current input frame and for the previous one
/// (taps `w'[τ] = ½(w[τ] + w[τ+1])`, `w'[last] = ½·w[last]`, bias kept; the previous frame's
/// oldest tap falls outside the kernel and is dropped). On an inflated decoder, which copies each
/// frame into both halves and so holds every latent for four frames, the first upsampling then
/// places a blend of two latents between them, and the second does the same at the quarters.
/// The first chunk after a stream's first latent has no previous frame in Wan's cache (zero
/// padding), so its earlier half starts at half amplitude; training on clips that start at frame
/// 0 is left to adapt it.
pub fn interpolate_time<B: Backend>(vae: WanVae<B>) -> WanVae<B> {
    vae.map(&mut TimeSurgery { path: Vec::new(), part: Trainable::Decoder, kind: Surgery::Interpolate })
}

enum Surgery {
    Inflate,
    Interpolate,
}

/// The module path being mapped, to tell the resampling time convolutions from the others.
struct TimeSurgery {
    path: Vec<String>,
    part: Trainable,
    kind: Surgery,
}

impl<B: Backend> ModuleMapper<B> for TimeSurgery {
    fn enter_module(&mut self, name: &str, _container_type: &str) {
        self.path.push(name.to_string());
    }

    fn exit_module(&mut self, _name: &str, _container_type: &str) {
        self.path.pop();
    }

    fn map_float<const D: usize>(&mut self, param: Param<Tensor<B, D>>) -> Param<Tensor<B, D>> {
        let (id, tensor, mapper) = param.consume();
        if !self.part.contains(&self.path.join(".")) {
            return Param::from_mapped_value(id, tensor, mapper);
        }
        let time_conv = self.path.iter().any(|name| name == "time_conv");
        let shape = tensor.dims();
        let tensor = match (&self.kind, time_conv, D) {
            (Surgery::Inflate, true, 1) => replace(tensor, |b| b.fill(0.0)),
            (Surgery::Inflate, true, 5) => replace(tensor, |w| time_identity(w, shape[0], shape[1], shape[2])),
            (Surgery::Inflate, false, 5) if shape[2] > 1 => {
                replace(tensor, |w| current_tap_only(w, shape[0] * shape[1], shape[2], shape[3] * shape[4]))
            }
            (Surgery::Interpolate, true, 5) if shape[0] == 2 * shape[1] => {
                replace(tensor, |w| average_with_previous(w, shape[1] * shape[1], shape[2], shape[3] * shape[4]))
            }
            _ => tensor,
        };
        Param::from_mapped_value(id, tensor, mapper)
    }
}

/// `tensor` with its values rewritten on the host by `f`, keeping device and gradient flag.
fn replace<B: Backend, const D: usize>(tensor: Tensor<B, D>, f: impl FnOnce(&mut [f32])) -> Tensor<B, D> {
    let device = tensor.device();
    let require_grad = tensor.is_require_grad();
    let data = tensor.into_data();
    let shape = data.shape.clone();
    let mut values = data.convert::<f32>().into_vec::<f32>().expect("f32 after convert");
    f(&mut values);
    Tensor::<B, D>::from_data(TensorData::new(values, shape), &device).set_require_grad(require_grad)
}

/// Zero every tap but the last of `[filters, taps, spatial]` (filters = out · in).
fn current_tap_only(w: &mut [f32], filters: usize, taps: usize, spatial: usize) {
    for filter in 0..filters {
        let start = filter * taps * spatial;
        w[start..start + (taps - 1) * spatial].fill(0.0);
    }
}

/// The first `filters` filters of `[filters, taps, spatial]` made to output the mean of their
/// output at the current step and at the previous one.
fn average_with_previous(w: &mut [f32], filters: usize, taps: usize, spatial: usize) {
    for filter in w.chunks_exact_mut(taps * spatial).take(filters) {
        // In tap order, so each tap reads the next one before it is rewritten.
        for i in 0..(taps - 1) * spatial {
            filter[i] = 0.5 * (filter[i] + filter[i + spatial]);
        }
        filter[(taps - 1) * spatial..].iter_mut().for_each(|v| *v *= 0.5);
    }
}

/// A `[out, in, taps, 1, 1]` time convolution that copies input channel `o mod in` from the last
/// tap into output channel `o` (`out` is `in` or `2·in`).
fn time_identity(w: &mut [f32], out: usize, input: usize, taps: usize) {
    w.fill(0.0);
    for o in 0..out {
        w[(o * input + o % input) * taps + taps - 1] = 1.0;
    }
}
