//! `flashforward world clips`: a dataset of the small world's procedural domain, as MP4 clips plus a
//! `captions.jsonl` (`{"video": "clip_00000.mp4", "caption": "..."}` per line, the format
//! `encode-videos` reads) and `scenes.jsonl` (each clip's ground-truth scene).
//!
//! Clip `i` is drawn from seed `hash(seed, i)`, so a dataset is reproducible and a rerun resumes:
//! clips already on disk (each MP4 is written atomically) are kept, and both JSONL files are
//! rewritten atomically at the end. `world.json` records what fixes a clip's content (every scene
//! flag but the count); a rerun with other values into the same folder is refused, since its kept
//! clips would not match the new captions.

use super::scenes::Scenes;
use anyhow::{Context, Result, bail};
use ff_model::io::write_atomic;
use ff_world::render::{frames_for_seconds, render_from};
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

/// The file recording the parameters of a `world clips` folder's clips.
pub const PARAMS_FILE: &str = "world.json";

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
