//! `flashforward world`: a dataset of the small world's procedural domain, as MP4 clips plus a
//! `captions.jsonl` (`{"video": "clip_00000.mp4", "caption": "..."}` per line, the format
//! `encode-videos` reads) and `scenes.jsonl` (each clip's ground-truth scene).
//!
//! Clip `i` is drawn from seed `hash(seed, i)`, so a dataset is reproducible and a rerun resumes:
//! clips already on disk (each MP4 is written atomically) are kept, and both JSONL files are
//! rewritten atomically at the end. `world.json` records what fixes a clip's content (every scene
//! flag but the count); a rerun with other values into the same folder is refused, since its kept
//! clips would not match the new captions.
//!
//! The small world's other data commands live beside it: [`text`] (`world-text`: tokenizer and
//! frozen text encoder) and [`latents`] (`world-latents`: latent shards straight from the
//! generator); [`files`] is the model directory they share.

pub mod files;
pub mod latents;
pub mod text;

use anyhow::{Context, Result, bail};
use ff_model::io::write_atomic;
use ff_world::render::{frames_for_seconds, render_from};
use ff_world::scene::window_start;
use ff_world::{Scene, SceneConfig};
use flashforward::video::{Frame, VideoSink};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Output directory.
    #[arg(long)]
    pub out: PathBuf,
    #[command(flatten)]
    pub scenes: Scenes,
}

/// The clips of a dataset: clip `i` is the scene of seed `clip_seed(seed, i)` (the same for
/// `world` and `world-latents`).
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

/// The file recording the parameters of a `world` folder's clips.
pub const PARAMS_FILE: &str = "world.json";

impl Scenes {
    /// Every parameter that fixes a clip's content (all but the count).
    fn params(&self) -> serde_json::Value {
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

/// Refuses a folder whose clips were drawn with other parameters (or with unknown ones), and
/// records the parameters of a new folder.
fn check_params(args: &Args) -> Result<()> {
    let (params, file) = (args.scenes.params(), args.out.join(PARAMS_FILE));
    match std::fs::read_to_string(&file) {
        Ok(text) => {
            let old: serde_json::Value = serde_json::from_str(&text).with_context(|| format!("{}: not JSON", file.display()))?;
            if old != params {
                bail!(
                    "{} holds clips drawn with {old}, not {params}: its clips would not match the new captions; use another --out or the same flags",
                    args.out.display()
                );
            }
            Ok(())
        }
        Err(_) if args.out.join("clip_00000.mp4").exists() => {
            bail!("{} holds clips but no {PARAMS_FILE} saying how they were drawn: use another --out", args.out.display())
        }
        Err(_) => Ok(write_atomic(&file, |w| writeln!(w, "{params}"))?),
    }
}

/// Seed of clip `i` of a dataset seeded `seed`.
pub fn clip_seed(seed: u64, i: usize) -> u64 {
    seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (i as u64).wrapping_mul(0xC2B2_AE3D_27D4_EB4F)
}

pub fn run(args: Args) -> Result<ExitCode> {
    std::fs::create_dir_all(&args.out).with_context(|| format!("cannot create {}", args.out.display()))?;
    check_params(&args)?;
    let frames = frames_for_seconds(args.scenes.seconds);
    let mut captions = Vec::with_capacity(args.scenes.clips);
    let mut scenes = Vec::with_capacity(args.scenes.clips);
    let mut written = 0;
    for i in 0..args.scenes.clips {
        let (scene, start) = (args.scenes.scene(i), args.scenes.start(i));
        let name = format!("clip_{i:05}.mp4");
        let path = args.out.join(&name);
        if !path.exists() {
            let clip = render_from(&scene, start, frames);
            let frames: Vec<Frame> = clip
                .frames
                .into_iter()
                .map(|rgb| flashforward::video::frame(clip.width, clip.height, rgb))
                .collect::<flashforward::Result<_>>()?;
            let mut sink = VideoSink::create(&path)?;
            sink.push_frames(&frames)?;
            sink.finish()?;
            written += 1;
        }
        captions.push(serde_json::json!({ "video": name, "caption": scene.caption() }));
        scenes.push(serde_json::json!({ "video": name, "start": start, "scene": scene }));
    }
    for (name, rows) in [("captions.jsonl", &captions), ("scenes.jsonl", &scenes)] {
        write_atomic(&args.out.join(name), |w| rows.iter().try_for_each(|r| Ok(writeln!(w, "{r}")?)))?;
    }
    println!(
        "{} clips of {frames} frames in {} ({written} written, {} kept)",
        args.scenes.clips,
        args.out.display(),
        args.scenes.clips - written
    );
    Ok(ExitCode::SUCCESS)
}
