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

use std::ops::ControlFlow;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use ff_model::AttentionBackend;
use ff_sched::ScheduleKind;
use flashforward::memory::{available_ram, human};
use flashforward::model::files::{default_model_dir_in, hub_cache};
use flashforward::model::{Fallback, FileOverrides, Model};
use flashforward::prompt::Source;
use flashforward::video::VideoSink;
use flashforward::{ContractKnobs, Executor, Pipeline, Plan, Request, TeacherSampler};

use crate::backend::{BackendTask, DeviceSpec, Precision, dispatch};
use crate::progress::{ChunkProgress, install_interrupt_flag};

#[derive(clap::Args)]
pub struct Args {
    /// What the video shows (not empty).
    #[arg(long, value_parser = non_empty_prompt)]
    prompt: String,
    /// What guided sampling steers away from, in place of the empty prompt (diffusers'
    /// `negative_prompt`): the planner's guided Euler steps of a student, or the teacher sampler
    /// with --guidance. A small-world student reads it as a caption of its vocabulary.
    #[arg(long, value_parser = non_empty_prompt)]
    negative_prompt: Option<String>,
    /// Length in seconds at 16 FPS, rounded up to the next 1 + 4k frames.
    #[arg(long, required_unless_present_any = ["latents", "schedule_file"], conflicts_with = "latents")]
    seconds: Option<f64>,
    /// Length in latent frames L (1 + 4(L-1) video frames).
    #[arg(long)]
    latents: Option<usize>,
    /// flashforward, self-forcing, hiar, n-c-causal-rcm or bidirectional.
    #[arg(long, default_value = "flashforward")]
    schedule: ScheduleKind,
    /// The state contract (defaults: the paper's). `--stages` are the few-step students'
    /// re-noising stages.
    #[command(flatten)]
    contract: ContractKnobs,
    /// A custom generation graph (JSON written by `plan --graph` or `Graph::to_json`), run
    /// instead of --schedule and the contract flags; its contract gives the length.
    #[arg(long, value_name = "GRAPH.json", conflicts_with_all = ["schedule", "latents", "seconds"])]
    schedule_file: Option<PathBuf>,
    /// Many-step sampling of a bidirectional teacher (`--schedule bidirectional` only): this many
    /// Euler steps over the whole clip instead of the `--stages` re-noising stages.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1000))]
    steps: Option<u32>,
    /// Classifier-free guidance scale against the empty prompt (with --steps): 1 is the plain
    /// conditional prediction (one forward per step), otherwise two forwards per step.
    #[arg(long, default_value_t = 1.0, requires = "steps")]
    guidance: f64,
    /// Shift of the Euler σ grid (with --steps): σ_i = shift·s / (1 + (shift − 1)·s) over
    /// s = 1 − i/steps; 5 is Wan2.1's, lower values spend more steps at low noise.
    #[arg(long, default_value_t = 5.0, requires = "steps")]
    sample_shift: f64,
    /// Keep the planner's clean anchor latents in the video at the anchor positions instead of
    /// the renderer's output there (the paper's splice baseline, Tab. 6): ablation.
    #[arg(long, conflicts_with = "steps")]
    splice: bool,
    /// Default: wavefront on several devices; on one, streaming when the planner is sampled by
    /// Euler steps (the installed student's), else serial.
    #[arg(long, value_enum)]
    executor: Option<Executor>,
    /// `cpu`, CUDA devices `cuda:0,1,2,3` or `wgpu:0` (need builds with those features).
    #[arg(long, default_value = "cpu")]
    devices: DeviceSpec,
    /// Float precision of the DiT and VAE (bf16 needs CUDA).
    #[arg(long, value_enum, default_value = "f32")]
    precision: Precision,
    /// Seed of the initial and re-noising noise: the same seed, prompt and files give the same
    /// video on every executor.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Output: .mp4, .gif, .png (numbered frames) or a directory of PNG frames.
    #[arg(long)]
    out: PathBuf,
    /// Frame height in pixels (a multiple of 16 for Wan2.1: VAE factor 8 × DiT patch 2)
    /// [default: the student's (64 for the default model), else 480].
    #[arg(long)]
    height: Option<usize>,
    /// Frame width in pixels (a multiple of 16, like --height) [default: the student's (64 for
    /// the default model), else 832].
    #[arg(long)]
    width: Option<usize>,
    #[command(flatten)]
    files: FileOverrides,
    /// Wan2.1 from the Hugging Face hub cache instead of the default model (without --model-dir).
    #[arg(long, conflicts_with = "model_dir")]
    hub: bool,
    /// Prompt embedding cache (safetensors); a hit skips loading the text encoder.
    #[arg(long)]
    prompt_cache: Option<PathBuf>,
    /// Cut prompts longer than the encoder's 512 tokens instead of refusing them.
    #[arg(long)]
    truncate_prompt: bool,
    /// Memory per device in GiB for the fit check (default: MemAvailable for the CPU).
    #[arg(long)]
    memory_limit: Option<f64>,
}

/// The prompt must say something: an empty (or all-whitespace) one is refused here, before any
/// file is read.
fn non_empty_prompt(prompt: &str) -> std::result::Result<String, String> {
    match prompt.trim() {
        "" => Err("the prompt is empty: describe what the video shows".into()),
        _ => Ok(prompt.to_string()),
    }
}

impl Args {
    /// The library request these flags describe.
    fn request(&self) -> Result<Request> {
        let mut request = Request::new(&self.prompt).schedule(self.schedule).contract(self.contract.clone()).seed(self.seed);
        request = match (self.latents, self.seconds) {
            (Some(latents), _) => request.latents(latents),
            (None, Some(seconds)) => request.seconds(seconds),
            (None, None) => request,
        };
        if let Some(path) = &self.schedule_file {
            let text = std::fs::read_to_string(path).with_context(|| format!("--schedule-file {}", path.display()))?;
            request = request.graph(ff_sched::Graph::from_json(&text).with_context(|| format!("--schedule-file {}", path.display()))?);
        }
        if let Some(negative) = &self.negative_prompt {
            request = request.negative_prompt(negative);
        }
        if let Some(steps) = self.steps {
            request = request.teacher(TeacherSampler { steps: steps as usize, guidance: self.guidance, shift: self.sample_shift });
        }
        if let Some(executor) = self.executor {
            request = request.executor(executor);
        }
        if let Some(cache) = &self.prompt_cache {
            request = request.prompt_cache(cache);
        }
        if self.height.is_some() || self.width.is_some() {
            request.frame_size = Some([self.height.unwrap_or(0), self.width.unwrap_or(0)]);
        }
        Ok(request.splice(self.splice).truncate_prompt(self.truncate_prompt))
    }
}

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
    let mut request = args.request()?;
    if let Some(frame) = request.frame_size.as_mut() {
        let [height, width] = model.frame_size();
        *frame = [args.height.unwrap_or(height), args.width.unwrap_or(width)];
    }
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
    request = request.stop_flag(install_interrupt_flag()?);
    let outcome = dispatch(&args.devices, args.precision, Generate { model, request, sink })?;
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
        let Generate { model, request, mut sink } = self;
        let pipe = Pipeline::<B>::load_on(model, &devices)?;
        let chunks = pipe.plan(&request)?.graph.outputs().len();
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
