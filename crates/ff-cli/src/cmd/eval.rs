//! `flashforward eval`: objective quality of videos of the small world (prompt accuracy, identity
//! persistence and the causes of its failed frames, smoothness, drift per 5 s window) and the
//! paper's seam statistics, which hold for any video. One JSON object per run (`--json`): the
//! metrics averaged over the videos, and with several videos a `per_video` array; `--plots DIR`
//! writes an SVG per metric over time.
//!
//! With `--switch SECONDS=PROMPT` (the prompt switching of `generate --switch`) each video is also
//! scored per segment on that segment's prompt (`segments`), with `switch_seconds` (how long after
//! each switch the new prompt's objects are shown; the ground truth shows them at once) and
//! `seams.switch` (the largest luminance jump within one latent of the switch);
//! `ff_world::eval::switch` defines them. Several switches: `switch_seconds` is the slowest
//! (null when one is never shown) and `seams.switch` the mean, each switch in `switches`.

use anyhow::{Context, Result, bail};
use ff_world::eval::{SeamLayout, SwitchReport, Transition, evaluate_switches};
use ff_world::svg::{Series, line_plot};
use ff_world::{Clip, EvalOptions, FPS, Prompt, Report, evaluate};
use flashforward::video::Mp4Input;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// MP4 videos to evaluate.
    #[arg(required = true)]
    pub videos: Vec<PathBuf>,
    /// The prompt of every video.
    #[arg(long, conflicts_with = "prompts")]
    pub prompt: Option<String>,
    /// A file with one prompt per line, in the order of the videos.
    #[arg(long)]
    pub prompts: Option<PathBuf>,
    /// The prompt switches the videos were made with, `SECONDS=PROMPT` (repeatable; the prompt
    /// before the first is --prompt or the file's line).
    #[arg(long = "switch", value_name = "SECONDS=PROMPT", value_parser = crate::switch_flag::parse)]
    pub switches: Vec<(f64, String)>,
    /// Anchor stride Δ in latents for the seam statistics (0: no anchors).
    #[arg(long, default_value_t = 10)]
    pub anchor_stride: usize,
    /// Renderer chunk size B_R in latents for the seam statistics.
    #[arg(long, default_value_t = 3)]
    pub chunk: usize,
    /// Length of the drift windows in seconds.
    #[arg(long, default_value_t = 5.0)]
    pub window: f64,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
    /// Write SVG plots of every metric over time into this directory.
    #[arg(long)]
    pub plots: Option<PathBuf>,
}

fn prompts(args: &Args) -> Result<Vec<String>> {
    let list = match (&args.prompt, &args.prompts) {
        (Some(p), None) => vec![p.clone(); args.videos.len()],
        (None, Some(file)) => std::fs::read_to_string(file)
            .with_context(|| format!("cannot read --prompts {}", file.display()))?
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(str::to_string)
            .collect(),
        _ => bail!("give --prompt TEXT or --prompts FILE"),
    };
    if list.len() != args.videos.len() {
        bail!("{} prompts for {} videos", list.len(), args.videos.len());
    }
    Ok(list)
}

/// Every frame of an MP4 at its own size, resampled to the domain's 16 FPS.
pub fn read_clip(path: &Path) -> Result<Clip> {
    let input = Mp4Input::open(path)?;
    let (width, height) = input.size();
    let count = input.frames_at_fps();
    let frames = input.read_frames(count, width, height)?;
    Ok(Clip { width, height, frames: frames.into_iter().map(|f| f.into_raw()).collect() })
}

fn summary(r: &Report) -> Value {
    json!({
        "prompt_accuracy": r.prompt_accuracy,
        "colour_accuracy": r.colour_accuracy,
        "shape_accuracy": r.shape_accuracy,
        "motion_accuracy": r.motion_accuracy,
        "identity_persistence": r.identity_persistence,
        "identity_failures": r.identity_failures,
        "mean_jump": r.mean_jump,
        "max_jump": r.max_jump,
        "seams": {"anchor": r.seams.anchor, "chunk": r.seams.chunk, "interior": r.seams.interior, "latent_boundary": r.seams.latent_boundary, "periodic": r.seams.periodic},
    })
}

fn average(reports: &[Report]) -> Value {
    let n = reports.len().max(1) as f64;
    let mean = |f: &dyn Fn(&Report) -> f64| reports.iter().map(f).sum::<f64>() / n;
    json!({
        "prompt_accuracy": mean(&|r| r.prompt_accuracy),
        "colour_accuracy": mean(&|r| r.colour_accuracy),
        "shape_accuracy": mean(&|r| r.shape_accuracy),
        "motion_accuracy": mean(&|r| r.motion_accuracy),
        "identity_persistence": mean(&|r| r.identity_persistence),
        "identity_failures": {
            "lost": mean(&|r| r.identity_failures.lost),
            "extra": mean(&|r| r.identity_failures.extra),
            "shape": mean(&|r| r.identity_failures.shape),
            "colour": mean(&|r| r.identity_failures.colour),
        },
        "mean_jump": mean(&|r| r.mean_jump),
        "max_jump": reports.iter().map(|r| r.max_jump).fold(0.0, f64::max),
        "seams": {
            "anchor": mean(&|r| r.seams.anchor),
            "chunk": mean(&|r| r.seams.chunk),
            "interior": mean(&|r| r.seams.interior),
            "latent_boundary": mean(&|r| r.seams.latent_boundary),
            "periodic": mean(&|r| r.seams.periodic),
        },
    })
}

fn plots(dir: &Path, video: &Path, r: &Report) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create --plots {}", dir.display()))?;
    let stem = video.file_stem().map_or("video".into(), |s| s.to_string_lossy().into_owned());
    let t = |f: usize| f as f64 / FPS as f64;
    let write = |name: &str, svg: String| {
        let path = dir.join(format!("{stem}_{name}.svg"));
        Ok(ff_model::io::write_atomic(&path, |w| std::io::Write::write_all(w, svg.as_bytes()))?)
    };
    let identity = vec![Series {
        name: "matches identity",
        points: r.persistent.iter().enumerate().map(|(f, p)| (t(f), f64::from(u8::from(*p)))).collect(),
    }];
    write("identity", line_plot(&format!("{stem}: identity per frame"), "seconds", "same objects (1/0)", &identity))?;
    let jumps: Vec<Series> = r
        .tracks
        .iter()
        .map(|k| Series {
            name: k.colour.name(),
            points: k
                .centroids
                .windows(2)
                .enumerate()
                .filter_map(|(f, w)| Some((t(f + 1), (w[0]?.0 - w[1]?.0).hypot(w[0]?.1 - w[1]?.1))))
                .collect(),
        })
        .collect();
    write("jumps", line_plot(&format!("{stem}: centroid jump per frame"), "seconds", "pixels", &jumps))?;
    let kinds = [(Transition::Anchor, "anchor"), (Transition::Chunk, "chunk"), (Transition::Interior, "interior")];
    let luminance: Vec<Series> = kinds
        .iter()
        .map(|(k, name)| Series {
            name,
            points: r.seams.jumps.iter().enumerate().filter(|(_, j)| j.1 == *k).map(|(f, j)| (t(f + 1), j.0)).collect(),
        })
        .collect();
    write("seams", line_plot(&format!("{stem}: adjacent-frame luminance jump"), "seconds", "mean |ΔY| (0–255)", &luminance))?;
    let window = |f: &dyn Fn(&ff_world::eval::Window) -> f64| r.drift.iter().map(|w| (w.start_seconds, f(w))).collect();
    let drift = vec![
        Series { name: "identity", points: window(&|w| w.identity_persistence) },
        Series { name: "appearance", points: window(&|w| w.appearance_accuracy) },
        Series { name: "jump (px)", points: window(&|w| w.mean_jump) },
    ];
    write("drift", line_plot(&format!("{stem}: drift per window"), "window start (s)", "value", &drift))
}

/// The switch scores of one video as JSON fields (see the module docs).
fn switch_fields(out: &mut Value, s: &SwitchReport) {
    let never = s.switches.iter().any(|w| w.switch_seconds.is_none());
    let slowest = s.switches.iter().filter_map(|w| w.switch_seconds).fold(0.0, f64::max);
    out["switch_seconds"] = if never { Value::Null } else { json!(slowest) };
    out["seams"]["switch"] = json!(s.switches.iter().map(|w| w.seam).sum::<f64>() / s.switches.len().max(1) as f64);
    out["segments"] = json!(s.segments);
    out["switches"] = json!(s.switches);
}

/// The switch scores averaged over videos: per segment index the mean metrics, the mean
/// `switch_seconds` over the videos that show every switch, and the share that do.
fn average_switches(out: &mut Value, reports: &[SwitchReport]) {
    let n = reports.len().max(1) as f64;
    let shown: Vec<f64> = reports
        .iter()
        .filter(|s| s.switches.iter().all(|w| w.switch_seconds.is_some()))
        .map(|s| s.switches.iter().filter_map(|w| w.switch_seconds).fold(0.0, f64::max))
        .collect();
    out["switch_shown"] = json!(shown.len() as f64 / n);
    out["switch_seconds"] = if shown.is_empty() { Value::Null } else { json!(shown.iter().sum::<f64>() / shown.len() as f64) };
    out["switch_seconds_max"] = json!(shown.iter().copied().fold(0.0, f64::max));
    let seams: f64 = reports.iter().map(|s| s.switches.iter().map(|w| w.seam).sum::<f64>() / s.switches.len().max(1) as f64).sum();
    out["seams"]["switch"] = json!(seams / n);
    let segments = reports.first().map_or(0, |s| s.segments.len());
    let mean = |i: usize, f: &dyn Fn(&ff_world::eval::switch::SegmentMetrics) -> f64| {
        reports.iter().map(|s| f(&s.segments[i].scores)).sum::<f64>() / n
    };
    out["segments"] = json!(
        (0..segments)
            .map(|i| json!({
                "prompt_accuracy": mean(i, &|m| m.prompt_accuracy),
                "colour_accuracy": mean(i, &|m| m.colour_accuracy),
                "shape_accuracy": mean(i, &|m| m.shape_accuracy),
                "motion_accuracy": mean(i, &|m| m.motion_accuracy),
                "identity_persistence": mean(i, &|m| m.identity_persistence),
            }))
            .collect::<Vec<_>>()
    );
}

pub fn run(args: Args) -> Result<ExitCode> {
    let prompts = prompts(&args)?;
    let switches = args.switches.iter().map(|(t, p)| Ok((*t, Prompt::parse(p)?))).collect::<Result<Vec<_>>>()?;
    let options = EvalOptions {
        seams: SeamLayout { anchor_stride: args.anchor_stride, chunk: args.chunk, temporal: 4 },
        window_seconds: args.window,
    };
    let mut reports = Vec::new();
    let mut switched = Vec::new();
    for (video, text) in args.videos.iter().zip(&prompts) {
        let prompt = Prompt::parse(text)?;
        let clip = read_clip(video).with_context(|| format!("cannot read video {}", video.display()))?;
        let report = evaluate(&clip, &prompt, &options)?;
        if !switches.is_empty() {
            switched.push(evaluate_switches(&clip, &prompt, &switches, &options).with_context(|| format!("video {}", video.display()))?);
        }
        if let Some(dir) = &args.plots {
            plots(dir, video, &report)?;
        }
        reports.push(report);
    }
    let mut out = average(&reports);
    if reports.len() > 1 {
        let per: Vec<Value> = args
            .videos
            .iter()
            .zip(&prompts)
            .zip(&reports)
            .enumerate()
            .map(|(i, ((v, p), r))| {
                let mut s = summary(r);
                s["video"] = json!(v.display().to_string());
                s["prompt"] = json!(p);
                s["drift"] = json!(r.drift);
                if let Some(sw) = switched.get(i) {
                    switch_fields(&mut s, sw);
                }
                s
            })
            .collect();
        out["per_video"] = json!(per);
        if !switched.is_empty() {
            average_switches(&mut out, &switched);
        }
    } else if let Some(r) = reports.first() {
        out["video"] = json!(args.videos[0].display().to_string());
        out["prompt"] = json!(prompts[0]);
        out["frames"] = json!(r.frames);
        out["tracks"] = json!(r.tracks);
        out["drift"] = json!(r.drift);
        if let Some(sw) = switched.first() {
            switch_fields(&mut out, sw);
        }
    }
    if args.json {
        println!("{out}");
    } else {
        println!("{}", serde_json::to_string_pretty(&out)?);
    }
    Ok(ExitCode::SUCCESS)
}
