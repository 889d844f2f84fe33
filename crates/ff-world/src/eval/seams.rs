//! The paper's seam statistics (Tab. 6) for any video: adjacent-frame luminance jumps, grouped
//! by the kind of latent boundary the two frames straddle.
//!
//! RGB frame 0 decodes from latent 0 and frames `4(l−1)+1 ..= 4l` from latent `l` (Wan VAE, 4×
//! in time). Anchor latents are `{mΔ : mΔ < L} ∪ {L − 1}`, renderer chunks are `B_R` consecutive
//! latents. The jump of transition `t → t+1` is the mean absolute difference of BT.601 luminance
//! over pixels, on the 0–255 scale (normalised per pixel, so sizes compare).
//! * `anchor`: mean jump where exactly one side is an anchor latent;
//! * `chunk`: at renderer-chunk boundaries with no anchor on either side;
//! * `interior`: every other transition;
//! * `latent_boundary`: the interior transitions between two latents (neither anchor nor chunk
//!   boundary): the jump the codec makes at any latent boundary, so the control against which the
//!   anchor and chunk jumps, which are latent boundaries too, show what the schedule adds (the
//!   paper's `interior` is the control on the Wan VAE, whose latents decode seamlessly; the small
//!   world's codec jumps at every latent boundary, under any schedule);
//! * `periodic`: Σ over one anchor period's `4Δ` transitions (from the one entering anchor latent
//!   mΔ, m ≥ 1) of (jump − interior), averaged over the complete periods of the clip.
//!   Without anchors (`anchor_stride` 0) `anchor` and `periodic` are 0.

use crate::render::Clip;
use crate::vocab::luma;
use serde::Serialize;

/// Where the latent boundaries are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeamLayout {
    /// Anchor stride Δ in latents (0: no anchors).
    pub anchor_stride: usize,
    /// Renderer chunk size B_R in latents.
    pub chunk: usize,
    /// RGB frames per latent after the first (4 for the Wan VAE).
    pub temporal: usize,
}

impl Default for SeamLayout {
    fn default() -> Self {
        Self { anchor_stride: 10, chunk: 3, temporal: 4 }
    }
}

/// The kind of latent boundary a transition between adjacent frames straddles.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Transition {
    /// Exactly one of the two frames decodes from an anchor latent.
    Anchor,
    /// A renderer-chunk boundary with no anchor on either side.
    Chunk,
    /// Every other transition.
    Interior,
}

/// The seam statistics of one clip (see the module docs); every jump is a mean absolute BT.601
/// luminance difference per pixel, 0–255.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Seams {
    /// Mean jump of the [`Transition::Anchor`] transitions (0 without anchors).
    pub anchor: f64,
    /// Mean jump of the [`Transition::Chunk`] transitions.
    pub chunk: f64,
    /// Mean jump of the [`Transition::Interior`] transitions.
    pub interior: f64,
    /// Mean jump of the interior transitions between two latents: the codec's own control.
    pub latent_boundary: f64,
    /// Σ over one anchor period's transitions of (jump − `interior`), averaged over the complete
    /// periods (0 without anchors).
    pub periodic: f64,
    /// Jump and kind of every transition.
    #[serde(skip)]
    pub jumps: Vec<(f64, Transition)>,
}

fn luminance(rgb: &[u8]) -> Vec<f64> {
    rgb.chunks_exact(3).map(|p| luma([p[0], p[1], p[2]].map(f64::from))).collect()
}

impl SeamLayout {
    /// Latent of RGB frame `f`.
    pub fn latent(&self, f: usize) -> usize {
        if f == 0 { 0 } else { (f - 1) / self.temporal.max(1) + 1 }
    }

    fn is_anchor(&self, l: usize, latents: usize) -> bool {
        self.anchor_stride > 0 && (l.is_multiple_of(self.anchor_stride) || l + 1 == latents)
    }

    /// Kind of transition `f → f + 1` in a clip of `latents` latents.
    pub fn kind(&self, f: usize, latents: usize) -> Transition {
        let (a, b) = (self.latent(f), self.latent(f + 1));
        if self.is_anchor(a, latents) != self.is_anchor(b, latents) {
            Transition::Anchor
        } else if a / self.chunk.max(1) != b / self.chunk.max(1) && !self.is_anchor(a, latents) {
            Transition::Chunk
        } else {
            Transition::Interior
        }
    }
}

fn mean(v: impl Iterator<Item = f64>) -> f64 {
    let (s, n) = v.fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
    if n == 0 { 0.0 } else { s / n as f64 }
}

/// Seam statistics of `clip` under `layout`.
pub fn measure(clip: &Clip, layout: &SeamLayout) -> Seams {
    let lum: Vec<Vec<f64>> = clip.frames.iter().map(|f| luminance(f)).collect();
    let latents = clip.frames.len().checked_sub(1).map_or(0, |last| layout.latent(last) + 1);
    let jumps: Vec<(f64, Transition)> = lum
        .windows(2)
        .enumerate()
        .map(|(f, w)| (mean(w[0].iter().zip(&w[1]).map(|(a, b)| (a - b).abs())), layout.kind(f, latents)))
        .collect();
    let of = |k: Transition| mean(jumps.iter().filter(|j| j.1 == k).map(|j| j.0));
    let interior = of(Transition::Interior);
    let between_latents = |f: usize| layout.latent(f) != layout.latent(f + 1);
    let latent_boundary =
        mean(jumps.iter().enumerate().filter(|(f, j)| j.1 == Transition::Interior && between_latents(*f)).map(|(_, j)| j.0));
    let period = layout.anchor_stride * layout.temporal;
    let periodic = if layout.anchor_stride == 0 || period == 0 {
        0.0
    } else {
        // Period m ≥ 1 starts with the transition into anchor latent mΔ (from frame 4(mΔ − 1)).
        let starts: Vec<usize> =
            (1..).map(|m| (m * layout.anchor_stride - 1) * layout.temporal).take_while(|s| s + period <= jumps.len()).collect();
        mean(starts.iter().map(|&s| jumps[s..s + period].iter().map(|j| j.0 - interior).sum::<f64>()))
    };
    let anchor = if layout.anchor_stride == 0 { 0.0 } else { of(Transition::Anchor) };
    Seams { anchor, chunk: of(Transition::Chunk), interior, latent_boundary, periodic, jumps }
}
