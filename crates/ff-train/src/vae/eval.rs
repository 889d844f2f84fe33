//! Reconstruction quality of a codec on one clip: PSNR of the full decode and of the streaming
//! decode (latents fed `chunk` frames at a time), both on frames quantised to 8 bits as a video
//! file holds them, the largest 8-bit difference between the two decodes, and whether the
//! decode keeps the clip's objects (the small world's detector on both, frame by frame), and the
//! codec's own seam: how much larger the frame-to-frame jump is where two latents meet than over
//! all transitions (`ff_world::eval::seams`' `latent_boundary / interior`, no anchors or chunks).
//! With `latent_noise` σ > 0 the latents are first moved as a generator's would be
//! ([`perturb_latents`]): how much a decoder keeps from imperfect latents.

use super::data::VideoClip;
use super::noise::perturb_latents;
use crate::TrainRng;
use burn::tensor::{Tensor, backend::Backend};
use ff_model::AttentionBackend;
use ff_model::vae::WanVae;
use ff_world::Clip;
use ff_world::detect::{Detection, detect};
use ff_world::eval::{SeamLayout, clip_identity, seams};

/// How far (pixels) a decoded object's centre may lie from the original's and still be the same.
pub const OBJECT_SHIFT_PX: f64 = 2.0;

/// What [`reconstruct`] measured on one clip.
#[derive(Clone, Debug, PartialEq)]
pub struct Reconstruction {
    /// PSNR (dB) of the full decode against the clip.
    pub psnr: f64,
    /// PSNR (dB) of the streaming decode against the clip.
    pub stream_psnr: f64,
    /// Largest difference between the full and the streaming decode, in 8-bit levels.
    pub stream_max_diff: u8,
    /// Latent frames of the clip.
    pub latents: usize,
    /// Fraction of frames whose full decode holds the original frame's objects: as many objects,
    /// each of the same colour and shape with its centre within [`OBJECT_SHIFT_PX`].
    pub objects_kept: f64,
    /// Whether the decode keeps the clip's identity as `flashforward eval` decides it (the most
    /// frequent set of detected colours and shapes, [`clip_identity`]): the shape and colour
    /// accuracy a generator in this codec's latent space can reach at best.
    pub identity_kept: bool,
    /// Mean jump between frames of two latents over the mean jump of all transitions, of the
    /// full decode (over the clips of the stack): the seam any schedule's latent boundaries show
    /// through this codec (1 for a codec whose latents decode seamlessly).
    pub boundary_ratio: f64,
    /// The same ratio of the original clips (≈ 1: the small world's objects move steadily).
    pub source_boundary_ratio: f64,
}

/// Encodes `clip` (its latent mean), moves the latents by noise of σ = `latent_noise` (drawn
/// from `rng`; none at 0) and decodes them whole and `chunk` latents at a time.
pub fn reconstruct<B: AttentionBackend>(
    vae: &WanVae<B>,
    clip: &VideoClip,
    chunk: usize,
    latent_noise: f64,
    rng: &mut TrainRng,
) -> crate::Result<Reconstruction> {
    let device = vae.quant_conv.bias.val().device();
    let target = clip.tensor::<B>(&device);
    let [n, _, t, h, w] = target.dims();
    let mean = perturb_latents(vae, vae.encode_mean(target.clone())?, &vec![latent_noise; n], rng);
    let full = to_u8(vae.decode(mean.clone())?);
    let latents = mean.dims()[2];
    let mut stream = vae.stream_decoder();
    let mut parts = Vec::new();
    for start in (0..latents).step_by(chunk.max(1)) {
        parts.push(stream.decode_chunk(mean.clone().narrow(2, start, chunk.max(1).min(latents - start)))?);
    }
    let streamed = to_u8(Tensor::cat(parts, 2));
    let target = to_u8(target);
    let stream_max_diff = full.iter().zip(&streamed).map(|(a, b)| a.abs_diff(*b)).max().unwrap_or(0);
    let kept = (0..n * t)
        .filter(|&f| same_objects(&detect(&frame(&full, f, t, h * w), w, h), &detect(&frame(&target, f, t, h * w), w, h)))
        .count();
    let frames = |data: &[u8], c: usize| (c * t..(c + 1) * t).map(|f| frame(data, f, t, h * w)).collect::<Vec<_>>();
    let identity_kept = (0..n).all(|c| clip_identity(&frames(&full, c), w, h) == clip_identity(&frames(&target, c), w, h));
    let boundary_ratio = |data: &[u8]| {
        let layout = SeamLayout { anchor_stride: 0, chunk: latents, temporal: 4 };
        let clips = (0..n).map(|c| seams::measure(&Clip { width: w, height: h, frames: frames(data, c) }, &layout));
        let (boundary, interior) = clips.fold((0.0, 0.0), |(b, i), s| (b + s.latent_boundary, i + s.interior));
        boundary / interior
    };
    Ok(Reconstruction {
        identity_kept,
        boundary_ratio: boundary_ratio(&full),
        source_boundary_ratio: boundary_ratio(&target),
        psnr: psnr(&full, &target),
        stream_psnr: psnr(&streamed, &target),
        stream_max_diff,
        latents,
        objects_kept: kept as f64 / (n * t).max(1) as f64,
    })
}

/// Frame `f` (clip-major over `[N, 3, T, pixels]` planar data) as interleaved RGB8.
fn frame(planar: &[u8], f: usize, frames: usize, pixels: usize) -> Vec<u8> {
    let (clip, t) = (f / frames, f % frames);
    let plane = |c: usize| &planar[((clip * 3 + c) * frames + t) * pixels..][..pixels];
    let (r, g, b) = (plane(0), plane(1), plane(2));
    (0..pixels).flat_map(|p| [r[p], g[p], b[p]]).collect()
}

/// Whether `decoded` holds exactly the objects of `original` (colour, shape, centre within
/// [`OBJECT_SHIFT_PX`]), matched one to one.
fn same_objects(decoded: &[Detection], original: &[Detection]) -> bool {
    let mut free: Vec<&Detection> = decoded.iter().collect();
    decoded.len() == original.len()
        && original.iter().all(|o| {
            let close = |d: &&Detection| {
                d.colour == o.colour
                    && d.shape == o.shape
                    && (d.centroid.0 - o.centroid.0).hypot(d.centroid.1 - o.centroid.1) <= OBJECT_SHIFT_PX
            };
            free.iter().position(close).map(|i| free.swap_remove(i)).is_some()
        })
}

/// Values in `[-1, 1]` as 8-bit levels (`round((x + 1)·127.5)`).
fn to_u8<B: Backend>(video: Tensor<B, 5>) -> Vec<u8> {
    let values = video.add_scalar(1.0).mul_scalar(127.5).round().clamp(0.0, 255.0).into_data();
    values.iter::<f32>().map(|v| v as u8).collect()
}

/// Peak signal-to-noise ratio of 8-bit data (`∞` for equal data).
pub fn psnr(a: &[u8], b: &[u8]) -> f64 {
    let sum: f64 = a.iter().zip(b).map(|(x, y)| (f64::from(*x) - f64::from(*y)).powi(2)).sum();
    let mse = sum / a.len().max(1) as f64;
    10.0 * (255.0f64 * 255.0 / mse).log10()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ff_world::vocab::{Colour, Shape};

    fn object(colour: Colour, shape: Shape, x: f64, y: f64) -> Detection {
        Detection { colour, shape, centroid: (x, y), area: 100.0, fit: 0.9 }
    }

    #[test]
    fn same_objects_needs_each_object_once_with_its_colour_shape_and_place() {
        let red = object(Colour::Red, Shape::Circle, 10.0, 10.0);
        let blue = object(Colour::Blue, Shape::Square, 40.0, 30.0);
        let original = [red.clone(), blue.clone()];
        assert!(same_objects(&[blue.clone(), red.clone()], &original), "order does not matter");
        assert!(same_objects(&[object(Colour::Red, Shape::Circle, 11.2, 11.2), blue.clone()], &original), "1.7 px shift");
        assert!(!same_objects(&[object(Colour::Red, Shape::Circle, 12.0, 11.0), blue.clone()], &original), "2.2 px shift");
        assert!(!same_objects(&[object(Colour::Orange, Shape::Circle, 10.0, 10.0), blue.clone()], &original), "colour");
        assert!(!same_objects(&[object(Colour::Red, Shape::Square, 10.0, 10.0), blue.clone()], &original), "shape");
        assert!(!same_objects(std::slice::from_ref(&red), &original), "a lost object");
        assert!(!same_objects(&[red.clone(), red.clone()], &original), "one object matched twice");
        assert!(!same_objects(&[red.clone(), blue.clone(), blue.clone()], &original), "a duplicated object");
        assert!(same_objects(&[], &[]));
    }
}
