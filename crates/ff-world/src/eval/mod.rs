//! Objective quality of a video of the domain, from the detector's per-frame objects.
//!
//! * prompt accuracy: per prompted object, colour, shape and motion verb each count a third;
//! * identity persistence: share of frames whose detected (colour, shape) multiset equals the
//!   clip's most common one (no object lost, duplicated or changed), and the other frames split
//!   by what went wrong ([`IdentityFailures`]);
//! * smoothness: centroid jumps between adjacent frames of each tracked object;
//! * drift: persistence, colour+shape accuracy and jumps per window (5 s by default);
//! * seams: the paper's luminance-jump statistics ([`seams`]), for any video.

mod motion;
pub mod seams;
pub mod switch;

use crate::Result;
use crate::detect::{Detection, detect};
use crate::render::{Clip, FPS};
use crate::vocab::{Colour, Motion, Prompt, Shape};
pub use seams::{SeamLayout, Seams, Transition};
use serde::Serialize;
use std::cmp::Ordering;
use std::collections::HashMap;
pub use switch::{SwitchReport, evaluate_switches};

/// What the evaluation needs besides the frames.
#[derive(Clone, Debug)]
pub struct EvalOptions {
    /// Where the latent boundaries are, for the seam statistics.
    pub seams: SeamLayout,
    /// Window length of the drift metrics, seconds.
    pub window_seconds: f64,
}

impl Default for EvalOptions {
    fn default() -> Self {
        Self { seams: SeamLayout::default(), window_seconds: 5.0 }
    }
}

/// One tracked object: identity and its motion over the clip.
#[derive(Clone, Debug, Serialize)]
pub struct Track {
    /// The tracked object's colour (from the clip's identity set).
    pub colour: Colour,
    /// The tracked object's shape (from the clip's identity set).
    pub shape: Shape,
    /// Recognised motion verb (`None`: the object did not move measurably).
    pub motion: Option<Motion>,
    /// Centroid per frame (`None` where the object was not found).
    #[serde(skip)]
    pub centroids: Vec<Option<(f64, f64)>>,
    /// Mean centroid distance between consecutive found frames, pixels.
    pub mean_jump: f64,
    /// Largest centroid distance between consecutive found frames, pixels.
    pub max_jump: f64,
}

/// Metrics of one drift window.
#[derive(Clone, Debug, Serialize)]
pub struct Window {
    /// Start of the window, seconds from the clip's first frame.
    pub start_seconds: f64,
    /// Share of the window's frames whose objects match the clip's identity set (0–1).
    pub identity_persistence: f64,
    /// Colour and shape of the prompted objects found in the window's frames (0–1).
    pub appearance_accuracy: f64,
    /// Largest per-track mean jump within the window, pixels.
    pub mean_jump: f64,
}

/// The frames that break the clip's identity, as shares of all frames, by what differs from the
/// clip's identity set (their sum is `1 − identity_persistence`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct IdentityFailures {
    /// Fewer objects than the identity set (an object lost, or no identity at all).
    pub lost: f64,
    /// More objects (one duplicated or a spurious blob).
    pub extra: f64,
    /// As many objects of the same colours, a shape read differently.
    pub shape: f64,
    /// As many objects, a colour differs.
    pub colour: f64,
}

impl IdentityFailures {
    /// `ids`: each frame's identity; `persistent`: whether it matches `reference`, the clip's.
    fn of(ids: &[Identity], persistent: &[bool], reference: &Identity) -> Self {
        let colours = |i: &Identity| i.iter().map(|(c, _)| *c).collect::<Vec<_>>();
        let mut counts = [0usize; 4];
        for (i, _) in ids.iter().zip(persistent).filter(|(_, p)| !**p) {
            counts[match i.len().cmp(&reference.len()) {
                Ordering::Less => 0,
                Ordering::Greater => 1,
                Ordering::Equal if reference.is_empty() => 0,
                Ordering::Equal if colours(i) == colours(reference) => 2,
                Ordering::Equal => 3,
            }] += 1;
        }
        let share = |k: usize| counts[k] as f64 / ids.len().max(1) as f64;
        Self { lost: share(0), extra: share(1), shape: share(2), colour: share(3) }
    }
}

/// The evaluation of one video.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// Frames in the clip.
    pub frames: usize,
    /// Mean of the colour, shape and motion accuracies (0–1).
    pub prompt_accuracy: f64,
    /// Share of prompted objects whose colour a track has (0–1).
    pub colour_accuracy: f64,
    /// Share of prompted objects whose colour's track has the prompted shape (0–1).
    pub shape_accuracy: f64,
    /// Share of prompted objects whose colour's track moves with the prompted verb (0–1).
    pub motion_accuracy: f64,
    /// Share of frames whose objects match the clip's identity set (0–1; 0 when that set is
    /// empty).
    pub identity_persistence: f64,
    /// The other frames, by what went wrong.
    pub identity_failures: IdentityFailures,
    /// Largest per-track mean jump, pixels.
    pub mean_jump: f64,
    /// Largest jump of any track, pixels.
    pub max_jump: f64,
    /// One track per (colour, shape) of the clip's identity set.
    pub tracks: Vec<Track>,
    /// The drift metrics per window ([`EvalOptions::window_seconds`]).
    pub drift: Vec<Window>,
    /// The seam statistics ([`seams::measure`]).
    pub seams: Seams,
    /// Per frame: whether its objects match the clip's identity set.
    #[serde(skip)]
    pub persistent: Vec<bool>,
}

/// The objects of a frame or a clip: (colour, shape) pairs, sorted.
pub type Identity = Vec<(Colour, Shape)>;

fn identity(d: &[Detection]) -> Identity {
    let mut v: Identity = d.iter().map(|d| (d.colour, d.shape)).collect();
    v.sort_by_key(|(c, s)| (*c as u8, *s as u8));
    v
}

/// The clip's identity as [`evaluate`] decides it: the most frequent per-frame set of detected
/// (colour, shape) pairs. `frames` are `width × height` RGB8.
pub fn clip_identity(frames: &[Vec<u8>], width: usize, height: usize) -> Identity {
    modal(&frames.iter().map(|f| identity(&detect(f, width, height))).collect::<Vec<_>>())
}

/// The drift windows `[start, end)` over `frames` frames, `window` frames each; a remainder under
/// half a window (the trailing frame of a 1 + 4(L − 1)-frame video) joins the window before it.
fn windows(frames: usize, window: usize) -> impl Iterator<Item = (usize, usize)> {
    let mut count = frames.div_ceil(window);
    if count > 1 && frames - (count - 1) * window < window.div_ceil(2) {
        count -= 1;
    }
    (0..count).map(move |i| (i * window, if i + 1 == count { frames } else { (i + 1) * window }))
}

fn modal(ids: &[Identity]) -> Identity {
    let mut counts: HashMap<&Identity, usize> = HashMap::new();
    ids.iter().for_each(|i| *counts.entry(i).or_default() += 1);
    // Ties go to the larger set, then the first seen, so the choice is deterministic.
    let best = counts.values().copied().max().unwrap_or(0);
    ids.iter().filter(|i| counts[i] == best).max_by_key(|i| i.len()).cloned().unwrap_or_default()
}

fn track(detections: &[Vec<Detection>], colour: Colour, shape: Shape, scale: f64) -> Track {
    let mut last: Option<(f64, f64)> = None;
    let centroids: Vec<Option<(f64, f64)>> = detections
        .iter()
        .map(|ds| {
            let pick = ds.iter().filter(|d| d.colour == colour).min_by(|a, b| {
                let key = |d: &Detection| {
                    let near = last.map_or(0.0, |l| (d.centroid.0 - l.0).hypot(d.centroid.1 - l.1));
                    (d.shape != shape) as u8 as f64 * 1e6 + near
                };
                key(a).total_cmp(&key(b))
            });
            let c = pick.map(|d| d.centroid);
            last = c.or(last);
            c
        })
        .collect();
    let jumps = motion::jumps(&centroids);
    let mean_jump = if jumps.is_empty() { 0.0 } else { jumps.iter().sum::<f64>() / jumps.len() as f64 };
    let max_jump = jumps.iter().copied().fold(0.0, f64::max);
    Track { colour, shape, motion: motion::verb(&centroids, scale), centroids, mean_jump, max_jump }
}

/// Prompted objects' colour, shape and motion recovered by the tracks: (colour, shape, motion)
/// accuracies, each the mean over prompted objects.
fn accuracy(prompt: &Prompt, tracks: &[Track]) -> (f64, f64, f64) {
    let n = prompt.objects.len().max(1) as f64;
    prompt.objects.iter().fold((0.0, 0.0, 0.0), |(c, s, m), o| match tracks.iter().find(|t| t.colour == o.colour) {
        Some(t) => (c + 1.0 / n, s + f64::from(u8::from(t.shape == o.shape)) / n, m + f64::from(u8::from(t.motion == Some(o.motion))) / n),
        None => (c, s, m),
    })
}

/// Evaluates `clip` against `prompt`.
///
/// Fails with [`WorldError::Frame`](crate::WorldError::Frame), naming the frame, when a frame
/// is not `3 · width · height` bytes.
///
/// ```
/// use ff_world::render::{frames_for_seconds, render};
/// use ff_world::{EvalOptions, Prompt, Scene, evaluate};
///
/// let scene = Scene::from_prompt(Prompt::parse("a red circle moves right on a black background").unwrap(), 1, 64, 64);
/// let clip = render(&scene, frames_for_seconds(5));
/// let score = |p: &str| evaluate(&clip, &Prompt::parse(p).unwrap(), &EvalOptions::default()).unwrap().prompt_accuracy;
/// // Colour, shape and motion each count a third.
/// assert_eq!(score("a blue square moves up on a black background"), 0.0);
/// assert!((score("a red square moves right on a black background") - 2.0 / 3.0).abs() < 1e-9);
/// ```
pub fn evaluate(clip: &Clip, prompt: &Prompt, options: &EvalOptions) -> Result<Report> {
    let detections: Vec<Vec<Detection>> = clip
        .frames
        .iter()
        .enumerate()
        .map(|(index, f)| {
            if f.len() != 3 * clip.width * clip.height {
                return Err(crate::WorldError::Frame {
                    index,
                    message: format!("{} bytes for {}x{} RGB", f.len(), clip.width, clip.height),
                });
            }
            Ok(detect(f, clip.width, clip.height))
        })
        .collect::<Result<_>>()?;
    let ids: Vec<Identity> = detections.iter().map(|d| identity(d)).collect();
    let reference = modal(&ids);
    let persistent: Vec<bool> = ids.iter().map(|i| !reference.is_empty() && *i == reference).collect();
    let share = |v: &[bool]| v.iter().filter(|p| **p).count() as f64 / v.len().max(1) as f64;
    let scale = clip.width.min(clip.height) as f64 / 64.0;
    let tracks: Vec<Track> = reference.iter().map(|&(c, s)| track(&detections, c, s, scale)).collect();
    let (colour, shape, motion) = accuracy(prompt, &tracks);
    let window = ((options.window_seconds * FPS as f64).round() as usize).max(1);
    let drift = windows(clip.frames.len(), window)
        .map(|(start, end)| {
            let local: Vec<Track> = reference.iter().map(|&(c, s)| track(&detections[start..end], c, s, scale)).collect();
            let (c, s, _) = accuracy(prompt, &local);
            let jumps: Vec<f64> = local.iter().map(|t| t.mean_jump).collect();
            Window {
                start_seconds: start as f64 / FPS as f64,
                identity_persistence: share(&persistent[start..end]),
                appearance_accuracy: (c + s) / 2.0,
                mean_jump: jumps.iter().copied().fold(0.0, f64::max),
            }
        })
        .collect();
    Ok(Report {
        frames: clip.frames.len(),
        prompt_accuracy: (colour + shape + motion) / 3.0,
        colour_accuracy: colour,
        shape_accuracy: shape,
        motion_accuracy: motion,
        identity_persistence: share(&persistent),
        identity_failures: IdentityFailures::of(&ids, &persistent, &reference),
        mean_jump: tracks.iter().map(|t| t.mean_jump).fold(0.0, f64::max),
        max_jump: tracks.iter().map(|t| t.max_jump).fold(0.0, f64::max),
        tracks,
        drift,
        seams: seams::measure(clip, &options.seams),
        persistent,
    })
}

#[cfg(test)]
mod tests;
