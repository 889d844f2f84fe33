//! RGB training clips of the codec: [`VideoClip`] on the host, and [`WorldClips`], the small
//! world rendered on the fly.
//!
//! Item `i` of a [`WorldClips`] stacks `stack` clips; clip `j` of it is the scene of seed
//! `first_seed + i·stack + j` (`Scene::sample`), seen from a start frame drawn from that seed in
//! `0..=max_start_seconds·16`, for `frames` frames, through a `crop × crop` window whose corner is
//! drawn from the same seed (the whole frame when `crop` is 0). Single frames (`frames = 1`) with
//! crops train the codec's spatial path at a fraction of a video step's cost; the causal cache
//! then needs clips of 17 frames (docs/RESULTS.md, "Codec").

use crate::data::ClipSource;
use crate::{TrainError, TrainRng}; // not `Result`: the `Config` derive expands to code that uses std's
use burn::config::Config;
use burn::tensor::{Tensor, TensorData, backend::Backend};
use ff_world::render::render_frame;
use ff_world::{FPS, Scene, SceneConfig};

/// RGB clips of one shape stacked on a batch axis: `[N, 3, T, H, W]` f32 in `[-1, 1]` (N = 1 for
/// one clip). The codec runs the N clips as one batch.
#[derive(Clone, Debug)]
pub struct VideoClip {
    /// The frames, `[N, 3, T, H, W]` f32 in `[-1, 1]`.
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
        Ok(Self { frames: TensorData::new(planar, [1, 3, frames.len(), height, width]) })
    }

    /// The clips of `parts` (all of one shape) as one stack, in order.
    pub fn stack(parts: &[VideoClip]) -> crate::Result<Self> {
        let shape = |c: &VideoClip| c.frames.shape[1..].to_vec();
        let first = parts.first().ok_or_else(|| TrainError::Shape("no clips to stack".into()))?;
        let mut values = Vec::new();
        let mut n = 0;
        for part in parts {
            if shape(part) != shape(first) {
                return Err(TrainError::Shape(format!("clips of shapes {:?} and {:?} in one stack", shape(first), shape(part))));
            }
            n += part.frames.shape[0];
            values.extend(part.frames.to_vec::<f32>().map_err(|e| TrainError::Shape(format!("{e:?}")))?);
        }
        let mut dims = shape(first);
        dims.insert(0, n);
        Ok(Self { frames: TensorData::new(values, dims) })
    }

    /// `[N, 3, T, H, W]` on `device`.
    pub fn tensor<B: Backend>(&self, device: &B::Device) -> Tensor<B, 5> {
        Tensor::from_data(self.frames.clone(), device)
    }

    /// Frames T.
    pub fn frames(&self) -> usize {
        self.frames.shape[2]
    }
}

/// The procedural clips of a codec run.
#[derive(Config, Debug, PartialEq)]
pub struct WorldClipsConfig {
    /// Frames per clip: `1 + 4k` (k ≥ 1 trains the causal cache; k = 0 single frames).
    #[config(default = 9)]
    pub frames: usize,
    /// Frame width in pixels (a positive multiple of 8).
    #[config(default = 64)]
    pub width: usize,
    /// Frame height in pixels (a positive multiple of 8).
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
    /// Side of the square window cut from each clip (a multiple of 8; 0 keeps the whole frame).
    #[config(default = 0)]
    pub crop: usize,
    /// Clips per item, run as one batch.
    #[config(default = 1)]
    pub stack: usize,
}

/// Clips rendered from scene seeds on demand.
pub struct WorldClips {
    config: WorldClipsConfig,
}

impl WorldClips {
    /// The clips of `config`; frames not `1 + 4k`, a width or height not a positive multiple of
    /// 8, a bad crop or stack is a [`TrainError::Config`].
    pub fn new(config: WorldClipsConfig) -> crate::Result<Self> {
        let c = &config;
        if c.frames % 4 != 1 || !c.width.is_multiple_of(8) || !c.height.is_multiple_of(8) || c.width == 0 || c.height == 0 {
            return Err(TrainError::Config(format!(
                "clips of {} frames at {}×{}: frames must be 1 + 4k, width and height positive multiples of 8",
                c.frames, c.width, c.height
            )));
        }
        if !c.crop.is_multiple_of(8) || c.crop > c.width.min(c.height) {
            return Err(TrainError::Config(format!("crop {} must be a multiple of 8 no larger than {}×{}", c.crop, c.width, c.height)));
        }
        if c.stack == 0 || c.clips < c.stack {
            return Err(TrainError::Config(format!("stack {} must be at least 1 and at most clips ({})", c.stack, c.clips)));
        }
        Ok(Self { config })
    }

    /// The clips' config.
    pub fn config(&self) -> &WorldClipsConfig {
        &self.config
    }

    /// The scene seed of clip `index` (counted in clips, not stacks).
    pub fn seed(&self, index: usize) -> u64 {
        self.config.first_seed.wrapping_add(index as u64)
    }

    /// Clip `index` (counted in clips): its frames through its crop window.
    fn clip(&self, index: usize) -> crate::Result<VideoClip> {
        let c = &self.config;
        let seed = self.seed(index);
        let scene =
            Scene::sample(seed, &SceneConfig { width: c.width, height: c.height, two_objects: c.two_objects, gradient: c.gradient });
        let mut rng = TrainRng::new(seed);
        let start = rng.below(c.max_start_seconds * FPS + 1);
        let frames: Vec<Vec<u8>> = (start..start + c.frames).map(|f| render_frame(&scene, f as f64 / FPS as f64)).collect();
        if c.crop == 0 {
            return VideoClip::from_rgb8(&frames, c.width, c.height);
        }
        let (top, left) = (rng.below(c.height - c.crop + 1), rng.below(c.width - c.crop + 1));
        let window: Vec<Vec<u8>> = frames
            .iter()
            .map(|frame| {
                (top..top + c.crop).flat_map(|y| &frame[3 * (y * c.width + left)..3 * (y * c.width + left + c.crop)]).copied().collect()
            })
            .collect();
        VideoClip::from_rgb8(&window, c.crop, c.crop)
    }
}

impl ClipSource<VideoClip> for WorldClips {
    fn len(&self) -> usize {
        self.config.clips / self.config.stack
    }

    fn get(&self, index: usize) -> crate::Result<VideoClip> {
        let stack = self.config.stack;
        if stack == 1 {
            return self.clip(index);
        }
        let clips = (index * stack..(index + 1) * stack).map(|i| self.clip(i)).collect::<crate::Result<Vec<_>>>()?;
        VideoClip::stack(&clips)
    }
}
