//! `flashforward generate`: a prompt to a video file, a thin shell over [`flashforward::Pipeline`].
//!
//! Order of work: parse and check everything cheap first (devices, output path, model files and
//! their configs, the request against the model, the memory estimate), so a run that cannot work
//! is refused before anything large loads; then load the pipeline on the devices and write each
//! chunk the library hands over into the video, which is complete and playable after every chunk.
//!
//! Which model: `--model-dir DIR` (Wan2.1 in either layout, or any folder in the diffusers layout),
//! `--hub` (Wan2.1 from the Hugging Face cache), else the default model: the small world's
//! FlashForward student shipped in `models/world/`.

mod args;

use std::ops::ControlFlow;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use ff_model::AttentionBackend;
use ff_sched::ScheduleKind;
use flashforward::memory::{available_ram, human};
use flashforward::model::files::{default_model_dir_in, hub_cache};
use flashforward::model::{Fallback, Model};
use flashforward::prompt::Source;
use flashforward::video::VideoSink;
use flashforward::{Pipeline, Plan, Request};

pub use self::args::Args;
use crate::backend::{BackendTask, Precision, dispatch};
use crate::progress::{ChunkProgress, install_interrupt_flag};

pub fn run(args: Args) -> Result<ExitCode> {
    if args.steps.is_some() && args.schedule != ScheduleKind::Bidirectional {
        bail!("--steps samples a bidirectional teacher: use it with --schedule bidirectional, not {}", args.schedule);
    }
    dispatch(&args.devices, args.precision, Probe)?;
    VideoSink::check(&args.out)?;
    let fallback_dir = default_model_dir_in(|k| std::env::var(k).ok());
    let hub = hub_cache();
    let fallback = if args.hub { Fallback::Hub(hub.as_ref()) } else { Fallback::Default(&fallback_dir) };
    let model = Model::open(args.files.resolve(fallback)?)?;
    let request = args.request()?;
    let plan = model.plan(&request, args.devices.count())?;
    for note in &plan.notes {
        eprintln!("note: {note}");
    }
    check_memory(&plan, &model, &args)?;
    // Creating the sink clears a stale output before any work.
    let sink = VideoSink::create(&args.out)?;
    match request.teacher {
        Some(t) => eprintln!(
            "{} latents ({} frames), {}x{} px, bidirectional teacher sampler: {} Euler steps (shift {}), guidance {}",
            plan.length.latents, plan.length.frames, plan.frame[1], plan.frame[0], t.steps, t.shift, t.guidance
        ),
        None => eprintln!("{}", plan.describe()),
    }
    for switch in &plan.switches {
        eprintln!(
            "switch at {} s: latent {} ({:.2} s) to \"{}\"",
            switch.at_seconds,
            switch.position,
            flashforward::switch::position_seconds(switch.position),
            switch.prompt
        );
    }
    let (request, chunks) = (request.stop_flag(install_interrupt_flag()?), plan.graph.outputs().len());
    let outcome = dispatch(&args.devices, args.precision, Generate { model, request, sink, chunks })?;
    report(&plan, &outcome)
}

/// Prints the run's timings and where the video went; exit status 130 when it was stopped.
fn report(plan: &Plan, outcome: &Outcome) -> Result<ExitCode> {
    let r = &outcome.report;
    let secs = |d: Duration| format!("{:.3} s", d.as_secs_f64());
    let text = match r.text_source {
        Source::Cache => "from the prompt cache",
        Source::Encoded => "encoded on the CPU",
    };
    eprintln!("text: {} tokens, {text} in {} | models loaded in {}", plan.tokens, secs(r.text), secs(outcome.load));
    eprintln!(
        "denoising path {} | TTFF {} | total with VAE {} | {} DiT forwards | slowest worker busy {:.3} s | peak K/V banks {}",
        secs(r.denoise),
        r.first_frames.map_or("-".into(), secs),
        secs(r.total),
        r.forwards,
        r.slowest_worker,
        human(r.peak_bank_bytes.iter().map(|b| *b as u64).sum())
    );
    match (&outcome.video, &r.stopped) {
        (Some(video), None) => {
            println!("{}: {} frames", video.display(), r.frames);
            Ok(ExitCode::SUCCESS)
        }
        (Some(video), Some(_)) => {
            eprintln!("stopped: interrupted (Ctrl-C)");
            println!("{}: {} of {} frames (a playable partial video)", video.display(), r.frames, plan.length.frames);
            Ok(ExitCode::from(130))
        }
        (None, Some(_)) => {
            eprintln!("stopped: interrupted (Ctrl-C); no frame was finished, nothing was written");
            Ok(ExitCode::from(130))
        }
        (None, None) => bail!("the generation ended without a video"),
    }
}

/// Refuses the run when the text encoder (CPU, f32, unless the prompt is cached) or the
/// generation on some device would not fit: available memory is `--memory-limit` when given,
/// else MemAvailable for the CPU; other devices are checked only with `--memory-limit`.
fn check_memory(plan: &Plan, model: &Model, args: &Args) -> Result<()> {
    let limit = args.memory_limit.map(|gib| (gib * (1u64 << 30) as f64) as u64);
    let devices = &args.devices;
    let dtype_bytes = match args.precision {
        Precision::F32 => 4,
        Precision::Bf16 => 2,
    };
    let estimates = plan.estimates(model, devices.count(), dtype_bytes, args.prompt_cache.as_deref())?;
    if let Some(text) = &estimates.text {
        let cpu = match limit {
            Some(bytes) if devices.is_host() => bytes,
            _ => available_ram()?,
        };
        text.check("cpu (text encoder)", cpu)?;
    }
    for (device, estimate) in estimates.devices.iter().enumerate() {
        let name = devices.name(device);
        match (limit, devices.is_host()) {
            (Some(bytes), _) => estimate.check(&name, bytes)?,
            (None, true) => estimate.check(&name, available_ram()?)?,
            (None, false) => eprintln!("note: no free-memory probe for {name}; pass --memory-limit to check"),
        }
    }
    Ok(())
}

/// Checks that the backend of `--devices` is built in and has its driver, before any work.
struct Probe;

impl BackendTask for Probe {
    type Output = ();
    fn run<B: AttentionBackend>(self, _: Vec<B::Device>) -> Result<()> {
        Ok(())
    }
}

/// The generation on the selected backend, written chunk by chunk into the sink.
struct Generate {
    model: Model,
    request: Request,
    sink: VideoSink,
    /// Output chunks of the plan (the progress bar's length).
    chunks: usize,
}

/// What a generation left.
struct Outcome {
    report: flashforward::Report,
    load: Duration,
    /// The output path (or frame pattern); `None` when stopped before any frame was written.
    video: Option<PathBuf>,
}

impl BackendTask for Generate {
    type Output = Outcome;
    fn run<B: AttentionBackend>(self, devices: Vec<B::Device>) -> Result<Outcome> {
        let Generate { model, request, mut sink, chunks } = self;
        let pipe = Pipeline::<B>::load_on(model, &devices)?;
        let mut progress = ChunkProgress::new(chunks);
        let mut failed = None;
        let report = pipe.generate_with(&request, |chunk| {
            if let Err(e) = sink.push_frames(chunk.frames) {
                failed = Some(e);
                return ControlFlow::Break(());
            }
            progress.chunk_done(chunk.latents.len());
            ControlFlow::Continue(())
        });
        if let Some(e) = failed {
            progress.abandon("failed");
            return Err(e).context("cannot write the video");
        }
        let report = report.inspect_err(|_| progress.abandon("failed"))?;
        match report.stopped {
            Some(_) => progress.abandon("interrupted"),
            None => progress.finish(),
        }
        // Every chunk left the output complete and playable; a stopped run keeps what it finished.
        let video = if report.stopped.is_none() || report.frames > 0 { Some(sink.finish()?) } else { None };
        Ok(Outcome { report, load: pipe.load_time(), video })
    }
}
