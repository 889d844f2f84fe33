//! Frame-count rule of the Wan VAE (4x temporal compression with a causal first frame):
//! `L` latent frames decode to `1 + 4(L - 1)` RGB frames, so a video has `1 + 4k` frames.
//! At 16 FPS, 5 s asks for 80 frames and gets 81 (L = 21).

use crate::error::{Result, invalid};

use super::FPS;

/// A video length that the VAE can produce, and the request it came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameCount {
    /// Latent frames `L`.
    pub latents: usize,
    /// RGB frames, `1 + 4(L - 1)`.
    pub frames: usize,
    /// RGB frames that were asked for.
    pub requested: usize,
}

impl FrameCount {
    /// The video of `latents` latent frames (at least 1).
    pub fn from_latents(latents: usize) -> Result<Self> {
        if latents == 0 {
            invalid!("a video needs at least 1 latent frame");
        }
        let frames = 1 + 4 * (latents - 1);
        Ok(Self { latents, frames, requested: frames })
    }

    /// The shortest video with at least `requested` RGB frames whose latent count is a multiple of
    /// `latent_multiple` (the chunk size, or 1 for no constraint).
    pub fn round_up(requested: usize, latent_multiple: usize) -> Result<Self> {
        if requested == 0 {
            invalid!("a video needs at least 1 frame");
        }
        if latent_multiple == 0 {
            invalid!("the latent multiple (chunk size) must be at least 1");
        }
        let latents = (requested - 1).div_ceil(4) + 1;
        let latents = latents.div_ceil(latent_multiple) * latent_multiple;
        Ok(Self { requested, ..Self::from_latents(latents)? })
    }

    /// [`FrameCount::round_up`] for a duration in seconds at [`FPS`] (`--seconds`).
    pub fn from_seconds(seconds: f64, latent_multiple: usize) -> Result<Self> {
        if !(seconds.is_finite() && seconds > 0.0) {
            invalid!("--seconds must be a positive number, got {seconds}");
        }
        let requested = (seconds * f64::from(FPS)).round().max(1.0) as usize;
        Self::round_up(requested, latent_multiple)
    }

    /// Whether the request was rounded up.
    pub fn rounded(&self) -> bool {
        self.frames != self.requested
    }

    /// Length in seconds at [`FPS`].
    pub fn seconds(&self) -> f64 {
        self.frames as f64 / f64::from(FPS)
    }

    /// A line for the user when the request was rounded up, `None` otherwise.
    pub fn rounding_note(&self) -> Option<String> {
        self.rounded().then(|| {
            format!(
                "requested {} frames; rounded up to {} frames = {} latents ({:.2} s at {FPS} FPS): \
                 videos have 1 + 4(L-1) frames",
                self.requested,
                self.frames,
                self.latents,
                self.seconds()
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latents_map_to_one_plus_four_k_frames() {
        // Table in DESIGN.md: 21, 81, 141, 261 latents for 5/20/35/65 s.
        for (latents, frames) in [(1, 1), (2, 5), (21, 81), (81, 321), (141, 561), (261, 1041)] {
            assert_eq!(FrameCount::from_latents(latents).unwrap().frames, frames);
        }
        assert!(FrameCount::from_latents(0).is_err());
    }

    #[test]
    fn round_up_keeps_valid_counts_and_rounds_the_rest() {
        let exact = FrameCount::round_up(81, 1).unwrap();
        assert_eq!((exact.latents, exact.frames, exact.rounded()), (21, 81, false));
        assert!(exact.rounding_note().is_none());
        for requested in [78, 79, 80] {
            let c = FrameCount::round_up(requested, 1).unwrap();
            assert_eq!((c.latents, c.frames, c.requested), (21, 81, requested));
            assert!(c.rounding_note().unwrap().contains("81 frames"));
        }
        assert_eq!(FrameCount::round_up(82, 1).unwrap().frames, 85);
        assert!(FrameCount::round_up(0, 1).is_err());
    }

    #[test]
    fn round_up_to_whole_chunks() {
        // 3-latent chunks: 2 latents -> 3 (9 frames); 21 latents already whole.
        assert_eq!(FrameCount::round_up(5, 3).unwrap().latents, 3);
        assert_eq!(FrameCount::round_up(81, 3).unwrap().latents, 21);
        assert_eq!(FrameCount::round_up(82, 3).unwrap().latents, 24);
        assert!(FrameCount::round_up(5, 0).is_err());
    }

    #[test]
    fn seconds_at_16_fps_match_the_design_table() {
        for (seconds, latents) in [(5.0, 21), (20.0, 81), (35.0, 141), (65.0, 261)] {
            let c = FrameCount::from_seconds(seconds, 3).unwrap();
            assert_eq!(c.latents, latents, "{seconds} s");
            assert!(c.rounded(), "{seconds} s is 16*s frames, one short of 1 + 4k");
        }
        assert!(FrameCount::from_seconds(0.0, 1).is_err());
        assert!(FrameCount::from_seconds(f64::NAN, 1).is_err());
    }
}
