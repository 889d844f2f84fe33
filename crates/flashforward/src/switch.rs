//! Prompt switching (ARCHITECTURE §13): a request changes its prompt at given times
//! ([`Request::switch`](crate::Request::switch)), or live while it runs ([`LiveSwitch`]).
//!
//! **Where a switch lands.** A switch at `t` seconds lands on the renderer chunk boundary whose
//! first frame is nearest to frame `t·16` (ties: the later boundary). Latent `l ≥ 1` holds frames
//! `4l − 3 ..= 4l` (latent 0 holds frame 0), so boundary `b` (a multiple of the chunk size B_R)
//! starts at frame `4b − 3`, i.e. at `(4b − 3)/16` s: with B_R = 3 a switch at 5 s lands at latent
//! 21, frame 81, 5.06 s. A switch that lands at latent 0 or past the video is refused.
//!
//! **What it changes.** From its boundary on, every renderer chunk is made under the new prompt
//! (its text cross-attention K/V), and every planner block whose first anchor is at or past the
//! boundary is planned under it; the self-attention K/V made before the switch (anchors, history)
//! is dropped, kept or re-cached for the chunks after it as [`SwitchPolicy`] says (default:
//! dropped, the video restarts at the switch). See `ff_sched::exec::Prompts`.
//!
//! **Live switches.** [`LiveSwitch::switch_to`] may be called from any thread while
//! [`Pipeline::generate_with`](crate::Pipeline::generate_with) runs. The prompt is taken when the
//! next forward starts, checked and encoded on that worker's thread (the text encoder on the CPU,
//! or the request's prompt cache), and applies from the first chunk boundary that no worker has
//! started a renderer forward of. Planner blocks already started keep the old prompt, so with the
//! serial or wavefront executor (which plan every anchor first) the anchors stay those of the old
//! prompt. A prompt that fails the check ([`Pipeline::check_prompt`](crate::Pipeline::check_prompt),
//! which a caller should run first) ends the generation with that error, naming the word. Which
//! prompt each chunk was made under is in [`Chunk::prompt`](crate::Chunk::prompt) and
//! [`Report::segments`](crate::Report::segments).

use std::sync::{Arc, Mutex};

pub use ff_sched::exec::Carry;

use crate::error::{Result, invalid};
use crate::video::FPS;

/// What the K/V published before a switch becomes for the readers after it (ARCHITECTURE §13),
/// per state: kept as made under the old prompt, re-cached under the new one (LongLive's KV
/// re-cache: the publishing forward runs again under the reader's prompt, from the same input),
/// or dropped (the readers after the switch start afresh, as the video's first chunk does).
/// Applies to the switches of the request; K/V published before a live switch is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SwitchPolicy {
    /// The planner's clean anchor K/V.
    pub anchors: Carry,
    /// The renderer's stage-matched history K/V.
    pub history: Carry,
}

impl Default for SwitchPolicy {
    /// Drop both: the measured choice (docs/RESULTS.md, section 12). On the small world, kept or
    /// re-cached K/V of the old scene keeps the old object on screen for seconds after the
    /// switch; dropped, the new prompt's object is shown within a quarter second in most pairs,
    /// as the ground truth's cut shows it at once.
    fn default() -> Self {
        Self { anchors: Carry::Drop, history: Carry::Drop }
    }
}

/// A prompt switch of a request: from `at_seconds` on, the video shows `prompt`.
#[derive(Debug, Clone, PartialEq)]
pub struct Switch {
    /// When the switch happens, seconds from the first frame (it lands on a chunk boundary: see
    /// the module docs).
    pub at_seconds: f64,
    /// The prompt from then on.
    pub prompt: String,
}

/// The first latent position under a switch at `at_seconds` in a video of `latents` latents
/// rendered in chunks of `chunk` (see the module docs).
pub fn switch_position(at_seconds: f64, chunk: usize, latents: usize) -> Result<usize> {
    if !(at_seconds.is_finite() && at_seconds > 0.0) {
        invalid!("a prompt switch at {at_seconds} s: the time must be a positive number of seconds");
    }
    let frame = at_seconds * f64::from(FPS);
    let first_frame = |b: usize| (4 * b).saturating_sub(3) as f64;
    let below = ((frame + 3.0) / 4.0 / chunk as f64).floor() as usize * chunk;
    let above = below + chunk;
    let position = if frame - first_frame(below) < first_frame(above) - frame { below } else { above };
    if position == 0 || position >= latents {
        let seconds = (1 + 4 * (latents - 1)) as f64 / f64::from(FPS);
        invalid!(
            "a prompt switch at {at_seconds} s lands at latent {position}, outside the video's {latents} latents \
             ({seconds:.2} s; a switch lands on a chunk boundary of {chunk} latents after the first)"
        );
    }
    Ok(position)
}

/// When latent position `position` starts, in seconds.
pub fn position_seconds(position: usize) -> f64 {
    (4 * position).saturating_sub(3) as f64 / f64::from(FPS)
}

/// One stretch of a generated video under one prompt.
#[derive(Debug, Clone, PartialEq)]
pub struct Segment {
    /// Its first latent position.
    pub first_latent: usize,
    /// When it starts, seconds ([`position_seconds`]).
    pub start_seconds: f64,
    /// The prompt it was made under (as the model read it).
    pub prompt: String,
}

/// A handle to switch a running generation's prompt from another thread (see the module docs).
///
/// ```no_run
/// use flashforward::{LiveSwitch, Pipeline, Request};
/// let pipe = Pipeline::<flashforward::Cpu>::load(flashforward::default_model_dir()?, &Default::default())?;
/// let live = LiveSwitch::new();
/// let request = Request::new("a red circle bounces").seconds(20.0).live_switch(live.clone());
/// let handle = live.clone();
/// std::thread::spawn(move || {
///     std::thread::sleep(std::time::Duration::from_secs(2));
///     handle.switch_to("a blue square moves left");
/// });
/// let video = pipe.generate(&request)?;
/// # Ok::<(), flashforward::Error>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct LiveSwitch {
    pending: Arc<Mutex<Option<String>>>,
}

impl LiveSwitch {
    /// A handle with no switch pending.
    pub fn new() -> Self {
        Self::default()
    }

    /// Switches to `prompt` at the first chunk boundary no worker has started yet. A second call
    /// before the first is taken replaces it.
    pub fn switch_to(&self, prompt: impl Into<String>) {
        *self.pending.lock().unwrap_or_else(|p| p.into_inner()) = Some(prompt.into());
    }

    /// The prompt switched to since the last call.
    pub(crate) fn take(&self) -> Option<String> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_switch_lands_on_the_chunk_boundary_nearest_its_time() {
        // 10 s: 41 latents in chunks of 3; boundary b starts at frame 4b - 3
        assert_eq!(switch_position(5.0, 3, 41).unwrap(), 21, "frame 80: boundary 21 (frame 81), not 18 (frame 69)");
        assert_eq!(position_seconds(21), 81.0 / 16.0);
        assert_eq!(switch_position(2.0, 3, 41).unwrap(), 9, "frame 32: boundary 9 (frame 33)");
        assert_eq!(switch_position(2.0, 1, 41).unwrap(), 9, "chunks of one latent: the latent starting nearest");
        assert_eq!(switch_position(0.5, 3, 41).unwrap(), 3, "frame 8: boundary 3 (frame 9)");
        assert_eq!(switch_position(9.9, 3, 41).unwrap(), 39, "the last chunk, latents 39 and 40");
        // frame 21 lies between boundary 3 (frame 9) and 6 (frame 21): exactly on 6
        assert_eq!(switch_position(21.0 / 16.0, 3, 41).unwrap(), 6);
        for (t, what) in [(0.0, "positive"), (-1.0, "positive"), (0.1, "outside"), (10.2, "outside"), (f64::NAN, "positive")] {
            let err = switch_position(t, 3, 41).unwrap_err().to_string();
            assert!(err.contains(what), "{t}: {err}");
        }
    }

    #[test]
    fn the_last_live_switch_before_a_forward_wins() {
        let live = LiveSwitch::new();
        assert_eq!(live.take(), None);
        let other = live.clone();
        other.switch_to("a");
        other.switch_to("b");
        assert_eq!(live.take().as_deref(), Some("b"));
        assert_eq!(live.take(), None);
    }
}
