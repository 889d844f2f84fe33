//! [`Request`]: what to generate. Everything has a default: five seconds of the prompt with the
//! FlashForward schedule at the model's contract (an exported student's, else the paper's), the
//! model's frame size, seed 0 and the executor chosen for the devices.
//!
//! ```
//! use flashforward::{Executor, Request, ScheduleKind};
//! let request = Request::new("a red circle bounces")
//!     .seconds(10.0)
//!     .seed(3)
//!     .schedule(ScheduleKind::FlashForward)
//!     .executor(Executor::Wavefront);
//! assert_eq!(request.prompt, "a red circle bounces");
//! ```

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use ff_sched::schedule::Node;
use ff_sched::{Contract, ContractConfig, Graph, ScheduleKind};

use crate::error::{Error, Result};
use crate::executor::Executor;
use crate::switch::{LiveSwitch, Switch, SwitchPolicy};

/// The length of a video.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Length {
    /// Seconds at 16 FPS, rounded up to the next 1 + 4k frames.
    Seconds(f64),
    /// Latent frames L (1 + 4(L − 1) video frames).
    Latents(usize),
}

/// The state-contract knobs a request may set over the model's contract (`None`: the model's).
#[derive(Debug, Clone, Default, PartialEq)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct ContractKnobs {
    /// Denoising stages S [default: 4; generate: the student's].
    #[cfg_attr(feature = "clap", arg(long))]
    pub stages: Option<usize>,
    /// Anchor stride Δ in latents [default: 10; generate: the student's].
    #[cfg_attr(feature = "clap", arg(long))]
    pub anchor_stride: Option<usize>,
    /// Anchors per renderer window Γ (windows share an endpoint) [default: 3].
    #[cfg_attr(feature = "clap", arg(long))]
    pub anchor_window: Option<usize>,
    /// Stage-matched history H in chunks [default: 5; generate: the student's].
    #[cfg_attr(feature = "clap", arg(long))]
    pub history: Option<usize>,
    /// Renderer chunk size B_R in latents [default: 3; generate: the student's].
    #[cfg_attr(feature = "clap", arg(long))]
    pub chunk: Option<usize>,
    /// Disable the clean anchor bank (and the planner): ablation.
    #[cfg_attr(feature = "clap", arg(long))]
    pub no_anchors: bool,
    /// Disable the stage-matched history (same as --history 0): ablation.
    #[cfg_attr(feature = "clap", arg(long, conflicts_with = "history"))]
    pub no_history: bool,
    /// Planner sampler: N Euler steps of its flow ODE instead of the S distilled stages (0: the
    /// stages) [default: 0; generate: the student's].
    #[cfg_attr(feature = "clap", arg(long))]
    pub planner_steps: Option<usize>,
    /// Classifier-free guidance of the planner's Euler steps against the empty prompt (1:
    /// unguided) [default: 1; generate: the student's].
    #[cfg_attr(feature = "clap", arg(long))]
    pub planner_guidance: Option<f64>,
}

impl ContractKnobs {
    /// The contract of a video of `latents` latent frames (the paper's defaults where no knob is
    /// set).
    pub fn contract(&self, latents: usize) -> Result<Contract> {
        self.contract_over(ContractConfig::new(latents))
    }

    /// The contract of `base` with the knobs that are set applied over it.
    pub fn contract_over(&self, base: ContractConfig) -> Result<Contract> {
        let history = if self.no_history { Some(0) } else { self.history };
        let config = ContractConfig {
            stages: self.stages.unwrap_or(base.stages),
            anchor_stride: self.anchor_stride.unwrap_or(base.anchor_stride),
            anchor_window: self.anchor_window.unwrap_or(base.anchor_window),
            history: history.unwrap_or(base.history),
            chunk: self.chunk.unwrap_or(base.chunk),
            use_anchors: base.use_anchors && !self.no_anchors,
            planner_steps: self.planner_steps.unwrap_or(base.planner_steps),
            planner_guidance: self.planner_guidance.unwrap_or(base.planner_guidance),
            ..base
        };
        Contract::new(config).map_err(|e| {
            Error::Invalid(format!(
                "{e} (flags: --latents or --seconds, --stages, --anchor-stride, --anchor-window, --history, --chunk, \
                 --planner-steps, --planner-guidance)"
            ))
        })
    }
}

/// Many-step sampling of a bidirectional teacher instead of a schedule's stages.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TeacherSampler {
    /// Euler steps over the whole clip.
    pub steps: usize,
    /// Classifier-free guidance against the negative (or empty) prompt; 1: one forward a step.
    pub guidance: f64,
    /// Shift of the σ grid: σ_i = shift·s / (1 + (shift − 1)·s) over s = 1 − i/steps (5: Wan2.1's).
    pub shift: f64,
}

/// What to generate (see the module docs); built with the chained setters.
#[derive(Debug, Clone)]
pub struct Request {
    /// What the video shows.
    pub prompt: String,
    /// What guided sampling steers away from in place of the empty prompt.
    pub negative_prompt: Option<String>,
    /// How long.
    pub length: Length,
    /// The schedule (ignored with a custom [`Request::graph`]).
    pub schedule: ScheduleKind,
    /// A custom generation graph (e.g. from `ff_sched::schedule::GraphBuilder`); its contract
    /// gives the length and the knobs.
    pub graph: Option<Graph>,
    /// Contract knobs over the model's contract.
    pub contract: ContractKnobs,
    /// The bidirectional teacher's Euler sampler instead of a schedule.
    pub teacher: Option<TeacherSampler>,
    /// Keep the planner's clean anchors in the video at the anchor positions (the paper's splice
    /// baseline, an ablation).
    pub splice: bool,
    /// How the forwards are spread over workers (`None`: [`Executor::default_for`]).
    pub executor: Option<Executor>,
    /// FlashForward-CP: shard every planner forward over all stage workers' devices (context
    /// parallelism), then render with the wavefront.
    pub planner_cp: bool,
    /// Seed of the initial and re-noising noise.
    pub seed: u64,
    /// Frame height in pixels (`None`: the model's).
    pub height: Option<usize>,
    /// Frame width in pixels (`None`: the model's).
    pub width: Option<usize>,
    /// A prompt-embedding cache file (safetensors); a hit skips the text encoder.
    pub prompt_cache: Option<PathBuf>,
    /// Cut prompts longer than the encoder's tokens instead of refusing them.
    pub truncate_prompt: bool,
    /// A flag another thread may set to stop the generation at the next forward.
    pub stop: Option<Arc<AtomicBool>>,
    /// Prompt switches at given times, each read like [`Request::prompt`] (see
    /// [`crate::switch`]).
    pub switches: Vec<Switch>,
    /// A handle another thread may switch the prompt with while the generation runs.
    pub live: Option<LiveSwitch>,
    /// What the K/V made before a switch becomes for the readers after it.
    pub switch_policy: SwitchPolicy,
    /// Called as each forward of a schedule starts and ends (see [`Forward`]).
    pub on_forward: Option<ForwardHook>,
}

/// One DiT forward starting or ending on a worker: the wavefront as it happens.
#[derive(Debug, Clone, Copy)]
pub struct Forward<'a> {
    /// The worker running it.
    pub worker: usize,
    /// The graph node it runs (its kind, unit, stage and level; `ff_sched::trace::label` names it).
    pub node: &'a Node,
    /// When it started or ended.
    pub at: Instant,
    /// Whether it ended (else it starts).
    pub done: bool,
}

/// A callback run on the worker threads as each forward of a schedule starts and ends (the
/// teacher sampler runs no schedule and calls none); it should return quickly.
#[derive(Clone)]
pub struct ForwardHook(pub Arc<dyn Fn(Forward) + Send + Sync>);

impl std::fmt::Debug for ForwardHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ForwardHook")
    }
}

impl Request {
    /// Five seconds of `prompt` with every other setting at its default.
    pub fn new(prompt: impl Into<String>) -> Self {
        Self {
            prompt: prompt.into(),
            negative_prompt: None,
            length: Length::Seconds(5.0),
            schedule: ScheduleKind::FlashForward,
            graph: None,
            contract: ContractKnobs::default(),
            teacher: None,
            splice: false,
            executor: None,
            planner_cp: false,
            seed: 0,
            height: None,
            width: None,
            prompt_cache: None,
            truncate_prompt: false,
            stop: None,
            switches: Vec::new(),
            live: None,
            switch_policy: SwitchPolicy::default(),
            on_forward: None,
        }
    }

    /// Length in seconds at 16 FPS.
    pub fn seconds(self, seconds: f64) -> Self {
        Self { length: Length::Seconds(seconds), ..self }
    }

    /// Length in latent frames.
    pub fn latents(self, latents: usize) -> Self {
        Self { length: Length::Latents(latents), ..self }
    }

    /// The noise seed.
    pub fn seed(self, seed: u64) -> Self {
        Self { seed, ..self }
    }

    /// The negative prompt of guided sampling.
    pub fn negative_prompt(self, negative: impl Into<String>) -> Self {
        Self { negative_prompt: Some(negative.into()), ..self }
    }

    /// The schedule.
    pub fn schedule(self, schedule: ScheduleKind) -> Self {
        Self { schedule, ..self }
    }

    /// A custom generation graph.
    pub fn graph(self, graph: Graph) -> Self {
        Self { graph: Some(graph), ..self }
    }

    /// Contract knobs over the model's contract.
    pub fn contract(self, contract: ContractKnobs) -> Self {
        Self { contract, ..self }
    }

    /// The bidirectional teacher's Euler sampler (with [`ScheduleKind::Bidirectional`]).
    pub fn teacher(self, sampler: TeacherSampler) -> Self {
        Self { teacher: Some(sampler), ..self }
    }

    /// The splice ablation.
    pub fn splice(self, splice: bool) -> Self {
        Self { splice, ..self }
    }

    /// The executor.
    pub fn executor(self, executor: Executor) -> Self {
        Self { executor: Some(executor), ..self }
    }

    /// FlashForward-CP ([`Request::planner_cp`]).
    pub fn planner_cp(self, planner_cp: bool) -> Self {
        Self { planner_cp, ..self }
    }

    /// Frame height and width in pixels.
    pub fn frame_size(self, height: usize, width: usize) -> Self {
        Self { height: Some(height), width: Some(width), ..self }
    }

    /// A prompt-embedding cache file.
    pub fn prompt_cache(self, path: impl Into<PathBuf>) -> Self {
        Self { prompt_cache: Some(path.into()), ..self }
    }

    /// Cut over-long prompts instead of refusing them.
    pub fn truncate_prompt(self, truncate: bool) -> Self {
        Self { truncate_prompt: truncate, ..self }
    }

    /// A flag that stops the generation at the next forward once set.
    pub fn stop_flag(self, flag: Arc<AtomicBool>) -> Self {
        Self { stop: Some(flag), ..self }
    }

    /// Switches the prompt to `prompt` from `at_seconds` on (repeatable; it lands on a chunk
    /// boundary, see [`crate::switch`]).
    pub fn switch(mut self, at_seconds: f64, prompt: impl Into<String>) -> Self {
        self.switches.push(Switch { at_seconds, prompt: prompt.into() });
        self
    }

    /// What the K/V made before a switch becomes after it.
    pub fn switch_policy(self, policy: SwitchPolicy) -> Self {
        Self { switch_policy: policy, ..self }
    }

    /// Takes live prompt switches from `handle` while the generation runs.
    pub fn live_switch(self, handle: LiveSwitch) -> Self {
        Self { live: Some(handle), ..self }
    }

    /// A callback for each forward's start and end.
    pub fn on_forward(self, hook: impl Fn(Forward) + Send + Sync + 'static) -> Self {
        Self { on_forward: Some(ForwardHook(Arc::new(hook))), ..self }
    }
}
