//! Scoring a video whose prompt switches: each segment on its own prompt, how long after each
//! switch the new prompt's objects are shown, and the jump at the switch.
//!
//! The ground truth of a switch is a clip rendered under the old prompt up to the switch frame
//! `round(t·16)` and under the new one from there, so its new objects are shown at once
//! (`switch_seconds` 0). A generated video may take longer: `switch_seconds` is the time from the
//! switch frame to the first frame from which every object of the new prompt (colour and shape)
//! is detected for [`HOLD`] frames in a row; `None` when that never happens before the next
//! switch. The jump at the switch is the largest adjacent-frame luminance jump (as in
//! [`super::seams`]) over the transitions within one latent (4 frames) of the switch frame.

use serde::Serialize;

use super::{EvalOptions, Report, evaluate, identity};
use crate::Result;
use crate::detect::detect;
use crate::render::{Clip, FPS};
use crate::vocab::Prompt;

/// Frames in a row that must show the new prompt's objects (a quarter second).
pub const HOLD: usize = 4;

/// One stretch of the video under one prompt, scored on it.
#[derive(Clone, Debug, Serialize)]
pub struct SegmentScore {
    /// The segment's prompt (its caption).
    pub prompt: String,
    /// First frame, seconds.
    pub start_seconds: f64,
    /// One past the last frame, seconds.
    pub end_seconds: f64,
    /// The segment's evaluation against its prompt.
    #[serde(flatten)]
    pub scores: SegmentMetrics,
}

/// The headline metrics of a segment (see [`Report`]).
#[derive(Clone, Debug, Serialize)]
pub struct SegmentMetrics {
    /// Mean of colour, shape and motion accuracy.
    pub prompt_accuracy: f64,
    /// Colour accuracy.
    pub colour_accuracy: f64,
    /// Shape accuracy.
    pub shape_accuracy: f64,
    /// Motion accuracy.
    pub motion_accuracy: f64,
    /// Identity persistence within the segment.
    pub identity_persistence: f64,
}

impl From<&Report> for SegmentMetrics {
    fn from(r: &Report) -> Self {
        Self {
            prompt_accuracy: r.prompt_accuracy,
            colour_accuracy: r.colour_accuracy,
            shape_accuracy: r.shape_accuracy,
            motion_accuracy: r.motion_accuracy,
            identity_persistence: r.identity_persistence,
        }
    }
}

/// One switch, scored.
#[derive(Clone, Debug, Serialize)]
pub struct SwitchScore {
    /// When the switch was asked for, seconds.
    pub at_seconds: f64,
    /// Seconds from the switch until the new prompt's objects are shown (`None`: never).
    pub switch_seconds: Option<f64>,
    /// Largest luminance jump within one latent of the switch (0–255).
    pub seam: f64,
}

/// The evaluation of a video with prompt switches.
#[derive(Clone, Debug, Serialize)]
pub struct SwitchReport {
    /// One per prompt, in order.
    pub segments: Vec<SegmentScore>,
    /// One per switch, in order.
    pub switches: Vec<SwitchScore>,
}

/// The frame a switch at `seconds` starts.
pub fn switch_frame(seconds: f64) -> usize {
    (seconds * FPS as f64).round().max(0.0) as usize
}

/// Scores `clip`, which shows `first` and then switches to each `(seconds, prompt)` of
/// `switches` (in time order), with `options` for each segment's evaluation. Fails when a switch
/// is not inside the clip or the switches are out of order.
pub fn evaluate_switches(clip: &Clip, first: &Prompt, switches: &[(f64, Prompt)], options: &EvalOptions) -> Result<SwitchReport> {
    let frames = clip.frames.len();
    let mut bounds = vec![0];
    for (seconds, _) in switches {
        let f = switch_frame(*seconds);
        if f == 0 || f >= frames || f <= *bounds.last().unwrap_or(&0) {
            return Err(crate::WorldError::Invalid(format!(
                "a switch at {seconds} s (frame {f}) must lie inside the clip's {frames} frames, after the previous switch"
            )));
        }
        bounds.push(f);
    }
    bounds.push(frames);
    let prompts: Vec<&Prompt> = std::iter::once(first).chain(switches.iter().map(|(_, p)| p)).collect();
    let seconds = |f: usize| f as f64 / FPS as f64;
    let mut segments = Vec::new();
    for (i, prompt) in prompts.iter().enumerate() {
        let (start, end) = (bounds[i], bounds[i + 1]);
        let part = Clip { width: clip.width, height: clip.height, frames: clip.frames[start..end].to_vec() };
        let report = evaluate(&part, prompt, options)?;
        segments.push(SegmentScore {
            prompt: prompt.caption(),
            start_seconds: seconds(start),
            end_seconds: seconds(end),
            scores: SegmentMetrics::from(&report),
        });
    }
    let whole = super::seams::measure(clip, &options.seams);
    let switches = switches
        .iter()
        .enumerate()
        .map(|(i, (at, prompt))| {
            let (start, end) = (bounds[i + 1], bounds[i + 2]);
            let wanted = prompt_identity(prompt);
            let shown: Vec<bool> = clip.frames[start..end]
                .iter()
                .map(|f| {
                    let seen = identity(&detect(f, clip.width, clip.height));
                    wanted.iter().all(|w| seen.contains(w))
                })
                .collect();
            let first_held = (0..shown.len()).find(|&f| shown[f..].iter().take(HOLD).filter(|s| **s).count() == HOLD.min(shown.len() - f));
            let near = start.saturating_sub(4)..(start + 4).min(whole.jumps.len());
            SwitchScore {
                at_seconds: *at,
                switch_seconds: first_held.map(seconds),
                seam: whole.jumps[near].iter().map(|j| j.0).fold(0.0, f64::max),
            }
        })
        .collect();
    Ok(SwitchReport { segments, switches })
}

/// The (colour, shape) pairs a prompt asks for, as the detector names them.
fn prompt_identity(prompt: &Prompt) -> super::Identity {
    prompt.objects.iter().map(|o| (o.colour, o.shape)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::{frames_for_seconds, render_from};
    use crate::scene::Scene;

    /// The ground truth of a switch: `a` rendered until frame `at`, then `b`.
    fn switched(a: &str, b: &str, at: usize) -> Clip {
        let scene = |p: &str| Scene::from_prompt(Prompt::parse(p).unwrap(), 3, 64, 64);
        let frames = frames_for_seconds(10);
        let mut clip = render_from(&scene(a), 0.0, at);
        clip.frames.extend(render_from(&scene(b), at as f64 / FPS as f64, frames - at).frames);
        clip
    }

    #[test]
    fn the_ground_truth_of_a_switch_shows_the_new_objects_at_once_and_a_late_one_later() {
        let (a, b) = ("a red circle moves right on a black background", "a blue square moves up on a black background");
        let parse = |p: &str| Prompt::parse(p).unwrap();
        let options = EvalOptions::default();
        let truth = evaluate_switches(&switched(a, b, 80), &parse(a), &[(5.0, parse(b))], &options).unwrap();
        assert_eq!(truth.switches[0].switch_seconds, Some(0.0));
        assert_eq!(truth.segments.len(), 2);
        for s in &truth.segments {
            assert_eq!(s.scores.prompt_accuracy, 1.0, "each segment on its own prompt: {s:?}");
        }
        assert_eq!(truth.segments[1].start_seconds, 5.0);
        assert!(truth.switches[0].seam > 1.0, "the objects change at the switch: {:?}", truth.switches[0]);
        // The new objects arrive 12 frames (0.75 s) late.
        let late = evaluate_switches(&switched(a, b, 92), &parse(a), &[(5.0, parse(b))], &options).unwrap();
        assert_eq!(late.switches[0].switch_seconds, Some(0.75));
        // Never: the old prompt all along.
        let never = evaluate_switches(&switched(a, a, 80), &parse(a), &[(5.0, parse(b))], &options).unwrap();
        assert_eq!(never.switches[0].switch_seconds, None);
        assert_eq!(never.segments[1].scores.prompt_accuracy, 0.0, "a blue square scored on a red circle");
        let err = evaluate_switches(&switched(a, b, 80), &parse(a), &[(11.0, parse(b))], &options).unwrap_err().to_string();
        assert!(err.contains("inside the clip"), "{err}");
    }
}
