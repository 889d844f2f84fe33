//! `flashforward generate`: a prompt to a video file.
//!
//! Order of work: parse and check everything cheap first (devices, length, model files and their
//! configs against each other, prompt length, memory estimate), so a run that cannot work is
//! refused before anything large loads; then encode the prompt on the CPU (or take it from the
//! prompt cache) and drop the encoder; then load the DiT and the VAE on the devices, run the
//! schedule's graph on the executor, and stream finished chunks through the VAE into the video
//! (see [`pipeline`]).
//!
//! Which model: `--model-dir DIR` (Wan2.1 in either layout, or any directory in the diffusers
//! layout), `--hub` (Wan2.1 from the Hugging Face cache), else the default model: the small
//! world's FlashForward student shipped in `models/world/` ([`paths::default_model_dir`]). A
//! student exported with its [`student`] manifest sets the defaults of `--stages` and the
//! contract knobs, `--height` / `--width`, and refuses prompts outside its vocabulary.

pub(crate) mod configs;
mod devices;
mod euler;
mod memory;
pub(crate) mod paths;
mod pipeline;
mod plan;
mod prompt;
mod splice;
mod stream;
pub(crate) mod student;

use ff_model::AttentionBackend;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use ff_model::text::PromptEmbedding;
use ff_sched::ScheduleKind;

use self::devices::Executor;
use self::memory::human;
use self::paths::FileFlags;
use self::plan::Plan;
use self::stream::Stop;
use super::plan::ContractKnobs;
use crate::backend::{BackendTask, DeviceSpec, Precision, dispatch};
use crate::progress::install_interrupt_flag;
use crate::video::VideoSink;

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
    #[arg(long, required_unless_present = "latents", conflicts_with = "latents")]
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
    files: FileFlags,
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

pub fn run(args: Args) -> Result<ExitCode> {
    if args.steps.is_some() && args.schedule != ScheduleKind::Bidirectional {
        bail!("--steps samples a bidirectional teacher: use it with --schedule bidirectional, not {}", args.schedule);
    }
    if !(args.sample_shift > 0.0 && args.sample_shift.is_finite()) {
        bail!("--sample-shift {} must be a positive number", args.sample_shift);
    }
    VideoSink::check(&args.out)?;
    let plan = Plan::new(&args)?;
    plan.check_memory(&args)?;
    let guided = args.steps.is_some_and(|_| args.guidance != 1.0) || (args.steps.is_none() && plan.graph.contract.planner_guided());
    if plan.negative_prompt.is_some() && !guided {
        bail!(
            "--negative-prompt steers guided sampling, and this run has none: a student whose planner is guided (planner \
             Euler steps with guidance ≠ 1: its contract's, or --planner-steps and --planner-guidance), or --steps with \
             --guidance ≠ 1"
        );
    }
    // Creating the sink checks the output format (and clears a stale output) before any work.
    let sink = VideoSink::create(&args.out)?;
    match args.steps {
        Some(steps) => eprintln!(
            "{} latents ({} frames), {}x{} px, bidirectional teacher sampler: {steps} Euler steps (shift {}), guidance {}",
            plan.length.latents, plan.length.frames, plan.frame[1], plan.frame[0], args.sample_shift, args.guidance
        ),
        None => eprintln!("{}", plan.describe(args.schedule)),
    }
    let text_start = Instant::now();
    let (embedding, source) = prompt::embed(&plan.text, &plan.prompt, args.prompt_cache.as_deref())?;
    // The empty (or negative) prompt, for a guided teacher sampler or guided planner steps.
    let empty = match guided {
        true => Some(prompt::embed(&plan.text, plan.negative_prompt.as_deref().unwrap_or(""), args.prompt_cache.as_deref())?.0),
        false => None,
    };
    let text_time = text_start.elapsed();

    let stop = Stop { interrupt: install_interrupt_flag()?, abort: Default::default() };
    let job = pipeline::Job {
        graph: &plan.graph,
        placement: plan.placement,
        batched: plan.executor == Executor::Batched,
        dit: &plan.files.dit,
        dit_config: &plan.configs.dit,
        vae: &plan.files.vae,
        vae_config: &plan.configs.vae,
        latent_size: plan.latent_size,
        seed: args.seed,
        splice: args.splice,
        empty: empty.as_ref(),
    };
    if let Some(steps) = args.steps {
        let guided = euler::Guided {
            job: &job,
            steps: steps as usize,
            shift: args.sample_shift,
            guidance: args.guidance,
            latents: plan.length.latents,
            prompt: &embedding,
            empty: empty.as_ref().unwrap_or(&embedding),
        };
        let outcome = dispatch(&args.devices, args.precision, Guided(guided, sink))?;
        eprintln!(
            "{steps} Euler steps, guidance {}: {} DiT forwards | models loaded in {:.3} s | denoising {:.3} s",
            args.guidance,
            outcome.forwards,
            outcome.load.as_secs_f64(),
            outcome.denoise.as_secs_f64()
        );
        println!("{}: {} frames", outcome.video.display(), outcome.frames);
        return Ok(ExitCode::SUCCESS);
    }
    let outcome = dispatch(&args.devices, args.precision, Generate { job, text: embedding, sink, stop })?;

    let secs = |d: Duration| format!("{:.3} s", d.as_secs_f64());
    let text = match source {
        prompt::Source::Cache => "from the prompt cache",
        prompt::Source::Encoded => "encoded on the CPU",
    };
    eprintln!("text: {} tokens, {text} in {} | models loaded in {}", plan.tokens, secs(text_time), secs(outcome.load));
    eprintln!(
        "denoising path {} | TTFF {} | total with VAE {} | slowest worker busy {:.3} s | peak K/V banks {}",
        secs(outcome.denoise),
        outcome.first_frames.map_or("-".into(), secs),
        secs(outcome.total),
        outcome.slowest_worker,
        human(outcome.peak_bank_bytes.iter().map(|b| *b as u64).sum())
    );
    match (outcome.video, outcome.stopped) {
        (Some(video), None) => {
            println!("{}: {} frames", video.display(), outcome.frames);
            Ok(ExitCode::SUCCESS)
        }
        (Some(video), Some(reason)) => {
            eprintln!("stopped: {reason}");
            println!("{}: {} of {} frames (a playable partial video)", video.display(), outcome.frames, plan.length.frames);
            Ok(ExitCode::from(130))
        }
        (None, Some(reason)) => {
            eprintln!("stopped: {reason}; no frame was finished, nothing was written");
            Ok(ExitCode::from(130))
        }
        (None, None) => bail!("the generation ended without a video"),
    }
}

/// Checks that the backend of `--devices` is built in and has its driver, before any work.
struct Probe;

impl BackendTask for Probe {
    type Output = ();
    fn run<B: AttentionBackend>(self, _: Vec<B::Device>) -> Result<()> {
        Ok(())
    }
}

/// The guided many-step generation on the selected backend (its first device).
struct Guided<'a>(euler::Guided<'a>, VideoSink);

impl BackendTask for Guided<'_> {
    type Output = euler::Outcome;
    fn run<B: AttentionBackend>(self, devices: Vec<B::Device>) -> Result<euler::Outcome> {
        euler::generate::<B>(&self.0, &devices[0], self.1)
    }
}

/// The generation on the selected backend.
struct Generate<'a> {
    job: pipeline::Job<'a>,
    text: PromptEmbedding,
    sink: VideoSink,
    stop: Stop,
}

impl BackendTask for Generate<'_> {
    type Output = pipeline::Outcome;
    fn run<B: AttentionBackend>(self, devices: Vec<B::Device>) -> Result<pipeline::Outcome> {
        pipeline::generate::<B>(&self.job, &self.text, &devices, self.sink, self.stop)
    }
}
