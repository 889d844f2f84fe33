//! The flags of `flashforward generate` and the library [`Request`] they describe.

use std::path::PathBuf;

use anyhow::{Context, Result};
use ff_sched::ScheduleKind;
use flashforward::model::FileOverrides;
use flashforward::{ContractKnobs, Executor, Request, SwitchPolicy, TeacherSampler};

use crate::backend::{DeviceSpec, Precision};

#[derive(clap::Args)]
pub struct Args {
    /// What the video shows (not empty).
    #[arg(long, value_parser = non_empty_prompt)]
    pub(super) prompt: String,
    /// What guided sampling steers away from, in place of the empty prompt (diffusers'
    /// `negative_prompt`): the planner's guided Euler steps of a student, or the teacher sampler
    /// with --guidance. A small-world student reads it as a caption of its vocabulary.
    #[arg(long, value_parser = non_empty_prompt)]
    pub(super) negative_prompt: Option<String>,
    /// Switch the prompt at a time: `--switch 5="a blue square moves left"` (repeatable). It
    /// lands on the renderer chunk boundary nearest the time; each prompt is read like --prompt.
    #[arg(long = "switch", value_name = "SECONDS=PROMPT", value_parser = crate::switch_flag::parse)]
    pub(super) switches: Vec<(f64, String)>,
    /// What the planner's anchors made before a --switch are to the chunks after it: kept as
    /// made, re-cached under the new prompt, or dropped [default: drop].
    #[arg(long, value_enum, requires = "switches")]
    pub(super) switch_anchors: Option<Carry>,
    /// The same for the renderer's stage-matched history [default: drop].
    #[arg(long, value_enum, requires = "switches")]
    pub(super) switch_history: Option<Carry>,
    /// Length in seconds at 16 FPS, rounded up to the next 1 + 4k frames.
    #[arg(long, required_unless_present_any = ["latents", "schedule_file"], conflicts_with = "latents")]
    pub(super) seconds: Option<f64>,
    /// Length in latent frames L (1 + 4(L-1) video frames).
    #[arg(long)]
    pub(super) latents: Option<usize>,
    /// flashforward, self-forcing, hiar, n-c-causal-rcm or bidirectional.
    #[arg(long, default_value = "flashforward")]
    pub(super) schedule: ScheduleKind,
    /// The state contract (defaults: the paper's). `--stages` are the few-step students'
    /// re-noising stages.
    #[command(flatten)]
    pub(super) contract: ContractKnobs,
    /// A custom generation graph (JSON written by `plan --graph` or `Graph::to_json`), run
    /// instead of --schedule and the contract flags; its contract gives the length.
    #[arg(long, value_name = "GRAPH.json", conflicts_with_all = ["schedule", "latents", "seconds"])]
    pub(super) schedule_file: Option<PathBuf>,
    /// Many-step sampling of a bidirectional teacher (`--schedule bidirectional` only): this many
    /// Euler steps over the whole clip instead of the `--stages` re-noising stages.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub(super) steps: Option<u32>,
    /// Classifier-free guidance scale against the empty prompt (with --steps): 1 is the plain
    /// conditional prediction (one forward per step), otherwise two forwards per step.
    #[arg(long, default_value_t = 1.0, requires = "steps")]
    pub(super) guidance: f64,
    /// Shift of the Euler σ grid (with --steps): σ_i = shift·s / (1 + (shift − 1)·s) over
    /// s = 1 − i/steps; 5 is Wan2.1's, lower values spend more steps at low noise.
    #[arg(long, default_value_t = 5.0, requires = "steps")]
    pub(super) sample_shift: f64,
    /// Keep the planner's clean anchor latents in the video at the anchor positions instead of
    /// the renderer's output there (the paper's splice baseline, Tab. 6): ablation.
    #[arg(long, conflicts_with = "steps")]
    pub(super) splice: bool,
    /// Default: wavefront on several devices; on one, streaming when the planner is sampled by
    /// Euler steps (the installed student's), else serial.
    #[arg(long, value_enum)]
    pub(super) executor: Option<Executor>,
    /// `cpu`, CUDA devices `cuda:0,1,2,3` or `wgpu:0` (need builds with those features).
    #[arg(long, default_value = "cpu")]
    pub(super) devices: DeviceSpec,
    /// FlashForward-CP: shard every planner forward over the stage devices (context
    /// parallelism), then render with the wavefront; the same video.
    #[arg(long)]
    pub(super) planner_cp: bool,
    /// Float precision of the DiT and VAE (bf16 needs CUDA).
    #[arg(long, value_enum, default_value = "f32")]
    pub(super) precision: Precision,
    /// Seed of the initial and re-noising noise: the same seed, prompt and files give the same
    /// video on every executor.
    #[arg(long, default_value_t = 0)]
    pub(super) seed: u64,
    /// Output: .mp4, .gif, .png (numbered frames) or a directory of PNG frames.
    #[arg(long)]
    pub(super) out: PathBuf,
    /// Frame height in pixels (a multiple of 16 for Wan2.1: VAE factor 8 × DiT patch 2)
    /// [default: the student's (64 for the default model), else 480].
    #[arg(long)]
    pub(super) height: Option<usize>,
    /// Frame width in pixels (a multiple of 16, like --height) [default: the student's (64 for
    /// the default model), else 832].
    #[arg(long)]
    pub(super) width: Option<usize>,
    #[command(flatten)]
    pub(super) files: FileOverrides,
    /// Wan2.1 from the Hugging Face hub cache instead of the default model (without --model-dir).
    #[arg(long, conflicts_with = "model_dir")]
    pub(super) hub: bool,
    /// Prompt embedding cache (safetensors); a hit skips loading the text encoder.
    #[arg(long)]
    pub(super) prompt_cache: Option<PathBuf>,
    /// Cut prompts longer than the encoder's 512 tokens instead of refusing them.
    #[arg(long)]
    pub(super) truncate_prompt: bool,
    /// Memory per device in GiB for the fit check (default: MemAvailable for the CPU).
    #[arg(long)]
    pub(super) memory_limit: Option<f64>,
}

/// `--switch-anchors`, `--switch-history`: [`flashforward::Carry`].
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub(super) enum Carry {
    Keep,
    Recache,
    Drop,
}

impl From<Carry> for flashforward::Carry {
    fn from(c: Carry) -> Self {
        match c {
            Carry::Keep => Self::Keep,
            Carry::Recache => Self::Recache,
            Carry::Drop => Self::Drop,
        }
    }
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
    pub(super) fn request(&self) -> Result<Request> {
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
        for (seconds, prompt) in &self.switches {
            request = request.switch(*seconds, prompt);
        }
        let default = request.switch_policy;
        request = request.switch_policy(SwitchPolicy {
            anchors: self.switch_anchors.map_or(default.anchors, Into::into),
            history: self.switch_history.map_or(default.history, Into::into),
        });
        if let Some(executor) = self.executor {
            request = request.executor(executor);
        }
        if let Some(cache) = &self.prompt_cache {
            request = request.prompt_cache(cache);
        }
        (request.height, request.width) = (self.height, self.width);
        Ok(request.splice(self.splice).truncate_prompt(self.truncate_prompt).planner_cp(self.planner_cp))
    }
}
