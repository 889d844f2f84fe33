//! Everything a generation decides before a model loads, and the checks that refuse a request
//! early: length rounded to 1 + 4k frames, prompt within the student's vocabulary and the
//! encoder's tokens, frame size and length within the model, the graph of the schedule (or the
//! request's own), and the executor's placement. [`Plan::estimates`] gives the memory each device
//! needs ([`crate::memory`]), for refusing a run that would not fit before anything large loads.

use ff_model::text::PromptEncoderFiles;
use ff_sched::exec::{Placement, waves};
use ff_sched::schedule::{NodeId, NodeKind, Unit};
use ff_sched::{ContractConfig, Graph, ScheduleKind};

use crate::error::{Context, Result, invalid};
use crate::executor::Executor;
use crate::memory::{Estimate, Sizes, checkpoint_contents, device_estimates, dit_contents};
use crate::model::Model;
use crate::model::served::merged_weights;
use crate::prompt;
use crate::request::{Length, Request};
use crate::switch::switch_position;
use crate::video::{FPS, FrameCount};

/// A checked request on a model.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Latents and frames.
    pub length: FrameCount,
    /// Frame height and width in pixels.
    pub frame: [usize; 2],
    /// Latent height and width.
    pub latent_size: [usize; 2],
    /// The generation graph.
    pub graph: Graph,
    /// The executor and its placement on the devices.
    pub executor: Executor,
    /// Workers of `executor` on the devices.
    pub placement: Placement,
    /// The text encoder's files.
    pub text: PromptEncoderFiles,
    /// The text the encoder reads: the prompt, or a small-world student's canonical caption.
    pub prompt: String,
    /// The text guided steps contrast the prompt with (read like `prompt`); `None` when nothing
    /// is guided.
    pub negative_prompt: Option<String>,
    /// Whether sampling is guided (the empty or negative prompt is encoded too).
    pub guided: bool,
    /// Prompt tokens (with `</s>`, after truncation).
    pub tokens: usize,
    /// The request's prompt switches, checked, in time order.
    pub switches: Vec<PlannedSwitch>,
    /// What the caller may want to tell a user: rounding, rewording, truncation.
    pub notes: Vec<String>,
}

/// A checked prompt switch (see [`crate::switch`]).
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedSwitch {
    /// When it was asked for, seconds.
    pub at_seconds: f64,
    /// The chunk boundary it lands on: its first latent position.
    pub position: usize,
    /// The text the encoder reads (as [`Plan::prompt`]).
    pub prompt: String,
}

impl Model {
    /// The text the encoder reads for `prompt` ([`prompt::read_as`]), refusing a prompt outside
    /// a small-world student's vocabulary (naming the words) or longer than the encoder takes.
    pub fn check_prompt(&self, prompt: &str) -> Result<String> {
        let read = prompt::read_as(self.student.as_ref(), prompt)?;
        prompt::check_length(&self.files.tokenizer, self.configs.dit.text_len, &read, false)?;
        Ok(read)
    }

    /// The text encoder's files.
    pub fn text_files(&self) -> PromptEncoderFiles {
        PromptEncoderFiles {
            tokenizer: self.files.tokenizer.clone(),
            weights: self.files.text_encoder.clone(),
            config: self.configs.text.clone(),
            max_len: self.configs.dit.text_len,
        }
    }

    /// The checked switches of `request` on `graph` (see [`crate::switch`]).
    fn plan_switches(&self, request: &Request, graph: &Graph) -> Result<Vec<PlannedSwitch>> {
        if request.switches.is_empty() && request.live.is_none() {
            return Ok(Vec::new());
        }
        if request.teacher.is_some() || graph.nodes.iter().any(|n| n.output && n.unit == Unit::Clip) {
            invalid!(
                "a prompt switch lands on a chunk boundary, and the {} schedule here makes the whole clip in one forward: \
                 switch with a chunked schedule (flashforward, self-forcing, hiar, n-c-causal-rcm)",
                graph.schedule
            );
        }
        let c = &graph.contract.config;
        let mut switches = Vec::new();
        for s in &request.switches {
            let position = switch_position(s.at_seconds, c.chunk, c.latents)?;
            let prompt = self.check_prompt(&s.prompt).with_context(|| format!("the prompt switch at {} s", s.at_seconds))?;
            switches.push(PlannedSwitch { at_seconds: s.at_seconds, position, prompt });
        }
        switches.sort_by_key(|s| s.position);
        if let Some(w) = switches.windows(2).find(|w| w[0].position == w[1].position) {
            invalid!(
                "the prompt switches at {} s and {} s land on the same chunk boundary (latent {}): keep one",
                w[0].at_seconds,
                w[1].at_seconds,
                w[0].position
            );
        }
        Ok(switches)
    }

    /// Checks `request` against this model for `devices` devices.
    pub fn plan(&self, request: &Request, devices: usize) -> Result<Plan> {
        let mut notes = Vec::new();
        let trained = |latents| self.student.as_ref().map_or(ContractConfig::new(latents), |s| s.contract_at(latents));
        let (length, graph) = match &request.graph {
            Some(graph) => {
                if request.teacher.is_some() {
                    invalid!("a custom graph is run by the executors; the teacher sampler runs none");
                }
                (FrameCount::from_latents(graph.contract.config.latents)?, graph.clone())
            }
            None => {
                let length = match request.length {
                    Length::Latents(latents) => FrameCount::from_latents(latents)?,
                    Length::Seconds(seconds) => FrameCount::from_seconds(seconds, 1)?,
                };
                let contract = request.contract.contract_over(trained(length.latents))?;
                (length, request.schedule.build(&contract)?)
            }
        };
        notes.extend(length.rounding_note());
        if request.teacher.is_some() && graph.schedule != ScheduleKind::Bidirectional.to_string() {
            invalid!(
                "the teacher sampler (--steps) samples a bidirectional teacher: use it with --schedule bidirectional, not {}",
                graph.schedule
            );
        }
        if let Some(t) = request.teacher.filter(|t| !(t.shift > 0.0 && t.shift.is_finite())) {
            invalid!("--sample-shift {} must be a positive number", t.shift);
        }
        let student = self.student.as_ref();
        let prompt = prompt::read_as(student, &request.prompt)?;
        if prompt != request.prompt {
            notes.push(format!("prompt: the student reads it as \"{prompt}\""));
        }
        let guided = match request.teacher {
            Some(t) => t.guidance != 1.0,
            None => graph.contract.planner_guided(),
        };
        let negative_prompt = match &request.negative_prompt {
            Some(_) if !guided => {
                invalid!(
                    "--negative-prompt steers guided sampling, and this run has none: a student whose planner is guided \
                     (planner Euler steps with guidance ≠ 1: its contract's, or --planner-steps and --planner-guidance), or \
                     --steps with --guidance ≠ 1"
                )
            }
            Some(negative) => Some(prompt::read_as(student, negative).context("--negative-prompt")?),
            None => guided.then(String::new),
        };
        let [height, width] = self.frame_size();
        let [height, width] = [request.height.unwrap_or(height), request.width.unwrap_or(width)];
        let latent_size = self.configs.latent_size(height, width)?;
        self.configs.check_latents(length.latents)?;
        if request.splice && !graph.nodes.iter().any(|n| n.kind == NodeKind::PlannerCache) {
            invalid!("--splice keeps planner anchors in the video, and the {} schedule here has none", graph.schedule);
        }
        if request.splice && request.teacher.is_some() {
            invalid!("--splice keeps planner anchors, and the teacher sampler has no planner");
        }
        let executor = match (request.executor, request.planner_cp) {
            (Some(executor), _) => executor,
            (None, true) => Executor::Wavefront,
            (None, false) => Executor::default_for(&graph, devices),
        };
        let mut placement = executor.placement(graph.contract.stages(), devices);
        if request.planner_cp {
            if executor != Executor::Wavefront || request.teacher.is_some() {
                invalid!(
                    "--planner-cp shards the planner over the wavefront's stage devices: it runs with the wavefront executor, not {executor}"
                );
            }
            if !graph.nodes.iter().any(|n| n.kind.is_planner()) {
                invalid!("--planner-cp shards planner forwards, and the {} schedule here has none", graph.schedule);
            }
            placement = Placement::context_parallel(placement.stage_workers);
        }
        let max_len = self.configs.dit.text_len;
        let tokenizer = &self.files.tokenizer;
        let (tokens, truncated) = prompt::check_length(tokenizer, max_len, &prompt, request.truncate_prompt)?;
        if truncated {
            notes.push(format!("the prompt is longer than {max_len} tokens; truncated to the first {max_len}"));
        }
        if let Some(negative) = &negative_prompt {
            prompt::check_length(tokenizer, max_len, negative, request.truncate_prompt).context("--negative-prompt")?;
        }
        let switches = self.plan_switches(request, &graph)?;
        let text = self.text_files();
        for note in &notes {
            tracing::info!("{note}");
        }
        let frame = [height, width];
        Ok(Plan { length, frame, latent_size, graph, executor, placement, text, prompt, negative_prompt, guided, tokens, switches, notes })
    }
}

/// What a plan needs in memory: the text encoder on the CPU (`None` when the prompt cache holds
/// every prompt) and the generation on each device.
#[derive(Debug, Clone)]
pub struct Estimates {
    /// The text encoder's f32 weights on the CPU.
    pub text: Option<Estimate>,
    /// One per device.
    pub devices: Vec<Estimate>,
}

impl Plan {
    /// The memory of this plan on `devices` devices holding `dtype_bytes`-byte floats, for a
    /// prompt cache at `prompt_cache` (see [`crate::memory`]).
    pub fn estimates(
        &self,
        model: &Model,
        devices: usize,
        dtype_bytes: usize,
        prompt_cache: Option<&std::path::Path>,
    ) -> Result<Estimates> {
        let mut cached = prompt::is_cached(&self.text, &self.prompt, prompt_cache)?;
        for switch in &self.switches {
            cached &= prompt::is_cached(&self.text, &switch.prompt, prompt_cache)?;
        }
        if let Some(negative) = &self.negative_prompt {
            cached &= prompt::is_cached(&self.text, negative, prompt_cache)?;
        }
        let text = match cached {
            true => None,
            false => {
                let (_, elements) = checkpoint_contents(&model.files.text_encoder)?;
                let mut text = Estimate::default();
                text.add("text encoder weights", elements * 4);
                Some(text)
            }
        };
        // A training run serves its roles as merged models of its base DiT's size.
        let (dit_elements, roles) = match merged_weights(&model.files.dit)? {
            Some(weights) => {
                let (keys, total) = checkpoint_contents(&weights)?;
                (dit_contents(&keys, total).0, true)
            }
            None => {
                let (keys, total) = checkpoint_contents(&model.files.dit)?;
                dit_contents(&keys, total)
            }
        };
        let (_, vae_elements) = checkpoint_contents(&model.files.vae)?;
        let sizes = Sizes {
            dit: &model.configs.dit,
            dit_elements,
            roles,
            vae_elements,
            vae_base_dim: model.configs.vae.base_dim,
            pixels: self.frame,
            latents: self.latent_size,
            dtype_bytes,
        };
        let forwards: Vec<Vec<NodeId>> = match self.executor {
            Executor::Batched => waves(&self.graph),
            _ => self.graph.nodes.iter().map(|n| vec![n.id]).collect(),
        };
        Ok(Estimates { text, devices: device_estimates(&self.graph, &self.placement, &forwards, devices, &sizes) })
    }

    /// One line about the run.
    pub fn describe(&self) -> String {
        let counts = self.graph.counts();
        let c = &self.graph.contract.config;
        let anchors = match (c.use_anchors, c.planner_steps) {
            (false, _) => "no anchors".into(),
            (true, 0) => format!("Δ = {}, G = {}", c.anchor_stride, c.anchor_window),
            (true, n) => {
                format!("Δ = {}, G = {}, planner {n} Euler steps, guidance {}", c.anchor_stride, c.anchor_window, c.planner_guidance)
            }
        };
        format!(
            "{} latents ({} frames, {:.2} s at {FPS} FPS), {}x{} px, schedule {} (S = {}, {anchors}, H = {}), executor {} on {} \
             worker(s); {} forwards ({} cache-update)",
            self.length.latents,
            self.length.frames,
            self.length.seconds(),
            self.frame[1],
            self.frame[0],
            self.graph.schedule,
            c.stages,
            c.history,
            self.executor,
            self.placement.workers(),
            counts.forwards,
            counts.cache_update_forwards
        )
    }
}
