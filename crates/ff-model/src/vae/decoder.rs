//! The Wan VAE decoder (diffusers `WanDecoder3d`): `n` latent frames `[B, z_dim, n, h, w]` ->
//! video frames `[B, 3, T', 8h, 8w]` (Wan2.1), with `T' = 1` for the first latent of a stream
//! (which passes alone) and `T' = 4n` for every later pass (two temporal upsamplers).

use super::blocks::{MidBlock, MidBlockConfig, ResidualBlock, ResidualBlockConfig};
use super::cache::CausalCache;
use super::config::WanVaeConfig;
use super::conv::{CausalConv3d, CausalConv3dConfig};
use super::norm::{WanRmsNorm, WanRmsNormConfig};
use super::resample::{Resample, ResampleConfig, ResampleMode};
use burn::module::Module;
use burn::tensor::{Tensor, backend::Backend};
use kernels_cubecl::AttentionBackend;

/// Latent pixels (batch × latent frames × h × w) the decoder takes in one pass: the activations a
/// pass holds are those of its `4·n` output frames, so a budget keeps Wan's 480p (60×104 latents)
/// at one latent per pass, as diffusers decodes it.
pub(crate) const PASS_LATENT_PIXELS: usize = 1024;

/// One decoder stage: `num_res_blocks + 1` residual blocks, then an upsampler except in the last
/// stage (diffusers `WanUpBlock`).
#[derive(Module, Debug)]
pub struct UpBlock<B: Backend> {
    /// The stage's residual blocks.
    pub resnets: Vec<ResidualBlock<B>>,
    /// Its upsampler (none in the last stage).
    pub upsampler: Option<Resample<B>>,
}

impl<B: AttentionBackend> UpBlock<B> {
    fn forward(&self, mut x: Tensor<B, 5>, cache: &mut CausalCache<B>) -> Tensor<B, 5> {
        for block in &self.resnets {
            x = block.forward(x, cache);
        }
        match &self.upsampler {
            Some(up) => up.forward(x, cache),
            None => x,
        }
    }
}

/// The decoder; built by [`WanVaeConfig::init`].
#[derive(Module, Debug)]
pub struct WanDecoder<B: Backend> {
    /// 3×3×3 causal convolution `z_dim →` the first stage's width.
    pub conv_in: CausalConv3d<B>,
    /// The middle block.
    pub mid_block: MidBlock<B>,
    /// The decoder stages, coarsest first.
    pub up_blocks: Vec<UpBlock<B>>,
    /// Norm of the last stage's output, followed by SiLU.
    pub norm_out: WanRmsNorm<B, 4>,
    /// 3×3×3 causal convolution to the 3 RGB channels.
    pub conv_out: CausalConv3d<B>,
}

impl<B: Backend> WanDecoder<B> {
    pub(crate) fn new(config: &WanVaeConfig, device: &B::Device) -> Self {
        let dims = config.decoder_dims();
        let stages = config.dim_mult.len();
        let up_blocks = (0..stages)
            .map(|stage| {
                // Every upsampler halves the channels, so later stages start from half the width.
                let in_dim = if stage == 0 { dims[0] } else { dims[stage] / 2 };
                let out_dim = dims[stage + 1];
                let resnets = (0..=config.num_res_blocks)
                    .map(|i| ResidualBlockConfig::new(if i == 0 { in_dim } else { out_dim }, out_dim).init(device))
                    .collect();
                let upsampler = (stage + 1 < stages).then(|| {
                    // The decoder runs the encoder's temporal schedule backwards.
                    let mode = match config.temperal_downsample[stages - 2 - stage] {
                        true => ResampleMode::Upsample3d,
                        false => ResampleMode::Upsample2d,
                    };
                    ResampleConfig::new(out_dim, mode).init(device)
                });
                UpBlock { resnets, upsampler }
            })
            .collect();
        let out_dim = dims[stages];
        Self {
            conv_in: CausalConv3dConfig::new([config.z_dim, dims[0]], [3, 3, 3]).with_padding([1, 1, 1]).init(device),
            mid_block: MidBlockConfig::new(dims[0]).init(device),
            up_blocks,
            norm_out: WanRmsNormConfig::new(out_dim).init(device),
            conv_out: CausalConv3dConfig::new([out_dim, 3], [3, 3, 3]).with_padding([1, 1, 1]).init(device),
        }
    }
}

impl<B: AttentionBackend> WanDecoder<B> {
    /// One chunk (one or more latent frames) of the stream whose state is `cache`.
    fn forward(&self, x: Tensor<B, 5>, cache: &mut CausalCache<B>) -> Tensor<B, 5> {
        cache.start_chunk();
        let split = self.frame_rate_split();
        let x = self.forward_latent_rate(x, split, cache);
        self.forward_frame_rate(x, split, cache)
    }

    /// The up blocks from `split` on run at the video's frame rate: those after the last
    /// temporal upsampler.
    fn frame_rate_split(&self) -> usize {
        self.up_blocks.iter().rposition(|b| b.upsampler.as_ref().is_some_and(Resample::doubles_time)).map_or(0, |i| i + 1)
    }

    /// `conv_in`, the middle block and the up blocks before `split`: latents to the input of the
    /// frame-rate layers.
    fn forward_latent_rate(&self, x: Tensor<B, 5>, split: usize, cache: &mut CausalCache<B>) -> Tensor<B, 5> {
        let x = self.conv_in.forward_cached(x, cache.next_slot());
        let mut x = self.mid_block.forward(x, cache);
        for block in &self.up_blocks[..split] {
            x = block.forward(x, cache);
        }
        x
    }

    /// The up blocks from `split` on and the output head: frames to RGB frames.
    fn forward_frame_rate(&self, mut x: Tensor<B, 5>, split: usize, cache: &mut CausalCache<B>) -> Tensor<B, 5> {
        for block in &self.up_blocks[split..] {
            x = block.forward(x, cache);
        }
        self.conv_out.forward_cached(self.norm_out.forward_silu(x), cache.next_slot())
    }

    /// Past frames an output frame of the frame-rate layers reads (through all of them).
    fn frame_rate_reach(&self, split: usize) -> usize {
        let blocks: usize = self.up_blocks[split..].iter().flat_map(|b| &b.resnets).map(ResidualBlock::past_frames).sum();
        blocks + self.conv_out.past_frames()
    }

    /// Decodes latents after `post_quant_conv`, continuing the stream whose state is `cache`.
    ///
    /// A stream's first latent passes alone: its temporal upsamplers keep its single frame
    /// (diffusers' `"Rep"`). Later latents pass several at a time, as many as keep a pass under
    /// [`PASS_LATENT_PIXELS`]: every layer is causal in time with a two-frame cache, or per frame,
    /// so a pass of `n` latents computes what `n` passes of one latent compute, with a few large
    /// operations instead of many small ones (at the small world's 8×8 latents, 16 per pass).
    pub(crate) fn decode_frames(&self, x: Tensor<B, 5>, cache: &mut CausalCache<B>) -> Tensor<B, 5> {
        let frames = x.dims()[2];
        let mut out = Vec::new();
        let mut start = 0;
        while start < frames {
            let n = pass_len(x.dims(), cache, frames - start);
            out.push(self.forward(x.clone().narrow(2, start, n), cache));
            start += n;
        }
        Tensor::cat(out, 2)
    }

    /// The last RGB frame of the decode of the first `end` latents, for each of `ends`
    /// (ascending, each in `1..=n` for latents `[B, z_dim, n, h, w]` after `post_quant_conv`):
    /// `[B, 3, 1, 8h, 8w]`, unclamped. The latent-rate layers run once over the latents, as in
    /// [`WanDecoder::decode_frames`]; the frame-rate layers, where most of the work is, run
    /// only on the frames each wanted frame reaches ([`WanDecoder::frame_rate_reach`], 18 for
    /// Wan2.1's layout), from a zero past. Every layer is causal, so a frame that far into such a
    /// window is the frame of the whole decode.
    pub(crate) fn last_frames(&self, x: Tensor<B, 5>, ends: &[usize]) -> Vec<Tensor<B, 5>> {
        let split = self.frame_rate_split();
        let reach = self.frame_rate_reach(split);
        let mut cache = CausalCache::default();
        // Latent-rate outputs of the latest passes, covering at least `reach + 1` frames.
        let mut window: Vec<Tensor<B, 5>> = Vec::new();
        let (mut window_frames, mut done) = (0, 0);
        let mut out = Vec::with_capacity(ends.len());
        for &end in ends {
            while done < end {
                let n = pass_len(x.dims(), &cache, end - done);
                cache.start_chunk();
                let y = self.forward_latent_rate(x.clone().narrow(2, done, n), split, &mut cache);
                window_frames += y.dims()[2];
                window.push(y);
                while window.len() > 1 && window_frames - window[0].dims()[2] > reach {
                    window_frames -= window.remove(0).dims()[2];
                }
                done += n;
            }
            // The last `reach + 1` frames: the oldest pass narrowed, the later ones whole.
            let keep = (reach + 1).min(window_frames);
            let skip = window_frames - keep;
            let first = window[0].clone().narrow(2, skip, window[0].dims()[2] - skip);
            let frames = Tensor::cat(std::iter::once(first).chain(window[1..].iter().cloned()).collect(), 2);
            let mut fresh = CausalCache::default();
            fresh.start_chunk();
            out.push(self.forward_frame_rate(frames, split, &mut fresh).narrow(2, keep - 1, 1));
        }
        out
    }
}

/// Latents the next pass of a stream takes, with `left` to go: its first latent alone (the
/// temporal upsamplers keep its single frame), then as many as keep the pass under
/// [`PASS_LATENT_PIXELS`].
fn pass_len<B: Backend>([batch, _, _, h, w]: [usize; 5], cache: &CausalCache<B>, left: usize) -> usize {
    if cache.is_fresh() { 1 } else { (PASS_LATENT_PIXELS / (batch * h * w)).clamp(1, left) }
}
