//! RGB training clips of the codec: [`VideoClip`] on the host, and [`WorldClips`], the small
//! world rendered on the fly.
//!
//! Clip `i` of a [`WorldClips`] is the scene of seed `first_seed + i` (`Scene::sample`), seen from
//! a start frame drawn from that seed in `0..=max_start_seconds·16`, for `frames` frames.

use crate::data::ClipSource;
use crate::{TrainError, TrainRng}; // not `Result`: the `Config` derive expands to code that uses std's
use burn::config::Config;
use burn::tensor::{Tensor, TensorData, backend::Backend};
use ff_world::render::render_frame;
use ff_world::{FPS, Scene, SceneConfig};

/// One RGB clip: `[3, T, H, W]` f32 in `[-1, 1]`.
#[derive(Clone, Debug)]
pub struct VideoClip {
    pub frames: TensorData,
}

impl VideoClip {
    /// A clip from RGB8 row-major frames of `width × height` (`0 → −1`, `255 → 1`).
    pub fn from_rgb8(frames: &[Vec<u8>], width: usize, height: usize) -> crate::Result<Self> {
        let pixels = width * height;
        let mut planar = vec![0f32; 3 * frames.len() * pixels];
        for (t, frame) in frames.iter().enumerate() {
            if frame.len() != 3 * pixels {
                return Err(TrainError::Shape(format!("frame {t} has {} bytes, {width}×{height} RGB needs {}", frame.len(), 3 * pixels)));
            }
            for (p, rgb) in frame.chunks_exact(3).enumerate() {
                for (c, v) in rgb.iter().enumerate() {
                    planar[(c * frames.len() + t) * pixels + p] = *v as f32 / 127.5 - 1.0;
                }
            }
        }
        Ok(Self { frames: TensorData::new(planar, [3, frames.len(), height, width]) })
    }

    /// `[1, 3, T, H, W]` on `device`.
    pub fn tensor<B: Backend>(&self, device: &B::Device) -> Tensor<B, 5> {
        Tensor::<B, 4>::from_data(self.frames.clone(), device).unsqueeze()
    }

    /// Frames T.
    pub fn frames(&self) -> usize {
        self.frames.shape[1]
    }
}

/// The procedural clips of a codec run.
#[derive(Config, Debug, PartialEq)]
pub struct WorldClipsConfig {
    /// Frames per clip: `1 + 4k` (k ≥ 1, so the causal cache carries state between chunks).
    #[config(default = 9)]
    pub frames: usize,
    #[config(default = 64)]
    pub width: usize,
    #[config(default = 64)]
    pub height: usize,
    /// Probability of a second object.
    #[config(default = 0.5)]
    pub two_objects: f64,
    /// Probability of a gradient background.
    #[config(default = 0.25)]
    pub gradient: f64,
    /// Scene seed of clip 0.
    #[config(default = 0)]
    pub first_seed: u64,
    /// Clips (scenes) in the dataset.
    #[config(default = 1_000_000)]
    pub clips: usize,
    /// Latest start of a clip's window, in seconds of its scene.
    #[config(default = 60)]
    pub max_start_seconds: usize,
}

/// Clips rendered from scene seeds on demand.
pub struct WorldClips {
    config: WorldClipsConfig,
}

impl WorldClips {
    pub fn new(config: WorldClipsConfig) -> crate::Result<Self> {
        let c = &config;
        if c.frames < 5 || c.frames % 4 != 1 || !c.width.is_multiple_of(8) || !c.height.is_multiple_of(8) || c.width == 0 || c.height == 0 {
            return Err(TrainError::Config(format!(
                "clips of {} frames at {}×{}: frames must be 1 + 4k with k ≥ 1, width and height positive multiples of 8",
                c.frames, c.width, c.height
            )));
        }
        Ok(Self { config })
    }

    pub fn config(&self) -> &WorldClipsConfig {
        &self.config
    }

    /// The scene seed of clip `index`.
    pub fn seed(&self, index: usize) -> u64 {
        self.config.first_seed.wrapping_add(index as u64)
    }
}

impl ClipSource<VideoClip> for WorldClips {
    fn len(&self) -> usize {
        self.config.clips
    }

    fn get(&self, index: usize) -> crate::Result<VideoClip> {
        let c = &self.config;
        let seed = self.seed(index);
        let scene =
            Scene::sample(seed, &SceneConfig { width: c.width, height: c.height, two_objects: c.two_objects, gradient: c.gradient });
        let start = TrainRng::new(seed).below(c.max_start_seconds * FPS + 1);
        let frames: Vec<Vec<u8>> = (start..start + c.frames).map(|f| render_frame(&scene, f as f64 / FPS as f64)).collect();
        VideoClip::from_rgb8(&frames, c.width, c.height)
    }
}
