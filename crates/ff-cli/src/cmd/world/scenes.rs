//! The clips of a small-world dataset, as `world clips` and `world latents` draw them: clip `i`
//! is the scene of seed [`clip_seed`]`(seed, i)`, from t = 0 or from a window start.

use ff_world::scene::window_start;
use ff_world::{Scene, SceneConfig};

/// The clips of a dataset: clip `i` is the scene of seed `clip_seed(seed, i)` (the same for
/// `world clips` and `world latents`).
#[derive(clap::Args, Debug)]
pub struct Scenes {
    /// Number of clips.
    #[arg(long, default_value_t = 100)]
    pub clips: usize,
    /// Seconds per clip (16 FPS: 16·s + 1 frames, 4·s + 1 latents).
    #[arg(long, default_value_t = 5)]
    pub seconds: usize,
    /// Dataset seed.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Frame width in pixels.
    #[arg(long, default_value_t = 64)]
    pub width: usize,
    /// Frame height in pixels.
    #[arg(long, default_value_t = 64)]
    pub height: usize,
    /// Probability of a second object per clip.
    #[arg(long, default_value_t = 0.0)]
    pub two_objects: f64,
    /// Probability of a gradient background per clip.
    #[arg(long, default_value_t = 0.25)]
    pub gradient: f64,
    /// Windows instead of scene openings: clip `i` starts at a time drawn uniformly from 0 to
    /// this many seconds of its scene (whole frames), so that its first frame may show a mover
    /// mid-way or resting against its wall; 0: every clip starts at t = 0.
    #[arg(long, default_value_t = 0.0)]
    pub start_within: f64,
}

impl Scenes {
    /// Every parameter that fixes a clip's content (all but the count).
    pub fn params(&self) -> serde_json::Value {
        let mut params = serde_json::json!({
            "seconds": self.seconds, "seed": self.seed, "width": self.width, "height": self.height,
            "two_objects": self.two_objects, "gradient": self.gradient,
        });
        // Recorded only when set, so that folders made before the flag keep their parameters.
        if self.start_within > 0.0 {
            params["start_within"] = self.start_within.into();
        }
        params
    }

    /// Clip `i`'s scene.
    pub fn scene(&self, i: usize) -> Scene {
        let config = SceneConfig { width: self.width, height: self.height, two_objects: self.two_objects, gradient: self.gradient };
        Scene::sample(clip_seed(self.seed, i), &config)
    }

    /// Clip `i`'s start time in its scene, seconds (`--start-within`).
    pub fn start(&self, i: usize) -> f64 {
        window_start(clip_seed(self.seed, i), self.start_within)
    }
}

/// Seed of clip `i` of a dataset seeded `seed`.
pub fn clip_seed(seed: u64, i: usize) -> u64 {
    seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (i as u64).wrapping_mul(0xC2B2_AE3D_27D4_EB4F)
}
