//! Everything `generate` decides before a model loads, and the checks that refuse a run early:
//! devices built in, length rounded to 1 + 4k frames, files found and consistent, prompt within
//! the student's vocabulary and the encoder's tokens, and the memory estimate within each device.

use anyhow::{Context, Result};
use ff_model::text::PromptEncoderFiles;
use ff_sched::exec::Placement;
use ff_sched::exec::waves;
use ff_sched::schedule::{NodeId, NodeKind};
use ff_sched::{ContractConfig, Graph, ScheduleKind};

use super::Args;
use super::configs::Configs;
use super::devices::{Executor, device_name};
use super::memory::{Estimate, Sizes, available_ram, checkpoint_contents, device_estimates, dit_contents};
use super::paths::{Fallback, ModelFiles, default_model_dir, hub_cache_dir};
use super::prompt;
use super::student::StudentManifest;
use crate::backend::{Precision, dispatch};
use crate::video::{FPS, FrameCount};

/// A checked generation request.
pub struct Plan {
    pub length: FrameCount,
    pub files: ModelFiles,
    pub configs: Configs,
    /// Frame height and width in pixels.
    pub frame: [usize; 2],
    /// Latent height and width.
    pub latent_size: [usize; 2],
    pub graph: Graph,
    pub executor: Executor,
    pub placement: Placement,
    pub text: PromptEncoderFiles,
    /// The text the encoder reads: `--prompt`, or a small-world student's canonical caption of it.
    pub prompt: String,
    /// The text guided steps contrast the prompt with in place of the empty prompt (read like
    /// `prompt`).
    pub negative_prompt: Option<String>,
    /// Prompt tokens (with `</s>`, after truncation).
    pub tokens: usize,
}

impl Plan {
    /// Checks `args` short of memory (see [`Plan::check_memory`]).
    pub fn new(args: &Args) -> Result<Self> {
        dispatch(&args.devices, args.precision, super::Probe)?;
        let length = match (args.seconds, args.latents) {
            (_, Some(latents)) => FrameCount::from_latents(latents)?,
            (Some(seconds), None) => FrameCount::from_seconds(seconds, 1)?,
            (None, None) => anyhow::bail!("give the length with --seconds or --latents"),
        };
        if let Some(note) = length.rounding_note() {
            eprintln!("note: {note}");
        }
        let env = |k: &str| std::env::var(k).ok();
        let (hub, default) = (hub_cache_dir(env), default_model_dir(env));
        let files = args.files.resolve(if args.hub { Fallback::Hub(hub.as_deref()) } else { Fallback::Default(&default) })?;
        let student = if files.dit.is_dir() { StudentManifest::read(&files.dit)? } else { None };
        let prompt = match &student {
            Some(student) => student.prompt_text(&args.prompt)?,
            None => args.prompt.clone(),
        };
        if prompt != args.prompt {
            eprintln!("prompt: the student reads it as \"{prompt}\"");
        }
        let negative_prompt = match (&student, &args.negative_prompt) {
            (Some(student), Some(negative)) => Some(student.prompt_text(negative).context("--negative-prompt")?),
            (_, negative) => negative.clone(),
        };
        let configs = Configs::read(&files)?;
        let [height, width] = student.as_ref().map_or([480, 832], |s| s.frame_size);
        let frame = [args.height.unwrap_or(height), args.width.unwrap_or(width)];
        let latent_size = configs.latent_size(frame[0], frame[1])?;
        configs.check_latents(length.latents)?;
        let trained = student.as_ref().map_or(ContractConfig::new(length.latents), |s| s.contract_at(length.latents));
        let graph = args.schedule.build(&args.contract.contract_over(trained)?)?;
        if args.splice && !graph.nodes.iter().any(|n| n.kind == NodeKind::PlannerCache) {
            anyhow::bail!("--splice keeps planner anchors in the video, and the {} schedule here has none", graph.schedule);
        }
        let executor = args.executor.unwrap_or_else(|| Executor::default_for(&graph, &args.devices));
        let placement = executor.placement(graph.contract.stages(), &args.devices);
        let max_len = configs.dit.text_len;
        let tokens = prompt::check_length(&files.tokenizer, max_len, &prompt, args.truncate_prompt)?;
        if let Some(negative) = &negative_prompt {
            prompt::check_length(&files.tokenizer, max_len, negative, args.truncate_prompt).context("--negative-prompt")?;
        }
        let text = PromptEncoderFiles {
            tokenizer: files.tokenizer.clone(),
            weights: files.text_encoder.clone(),
            config: configs.text.clone(),
            max_len,
        };
        Ok(Self { length, files, configs, frame, latent_size, graph, executor, placement, text, prompt, negative_prompt, tokens })
    }

    /// Refuses the run when the text encoder (CPU, f32, unless the prompt is cached) or the
    /// generation on some device would not fit: available memory is `--memory-limit` when given,
    /// else MemAvailable for the CPU; other devices are checked only with `--memory-limit`.
    pub fn check_memory(&self, args: &Args) -> Result<()> {
        let limit = args.memory_limit.map(|gib| (gib * (1u64 << 30) as f64) as u64);
        let devices = &args.devices;
        if !prompt::is_cached(&self.text, &self.prompt, args.prompt_cache.as_deref())? {
            let (_, elements) = checkpoint_contents(&self.files.text_encoder)?;
            let mut text = Estimate::default();
            text.add("text encoder weights", elements * 4);
            let cpu = match (limit, devices) {
                (Some(bytes), d) if d.is_host() => bytes,
                _ => available_ram()?,
            };
            text.check("cpu (text encoder)", cpu)?;
        }
        // A training run serves its roles as merged models of its base DiT's size.
        let (dit_elements, roles) = match ff_train::checkpoint::merged_weights(&self.files.dit)? {
            Some(weights) => {
                let (keys, total) = checkpoint_contents(&weights)?;
                (dit_contents(&keys, total).0, true)
            }
            None => {
                let (keys, total) = checkpoint_contents(&self.files.dit)?;
                dit_contents(&keys, total)
            }
        };
        let (_, vae_elements) = checkpoint_contents(&self.files.vae)?;
        let sizes = Sizes {
            dit: &self.configs.dit,
            dit_elements,
            roles,
            vae_elements,
            vae_base_dim: self.configs.vae.base_dim,
            pixels: self.frame,
            latents: self.latent_size,
            dtype_bytes: match args.precision {
                Precision::F32 => 4,
                Precision::Bf16 => 2,
            },
        };
        let forwards: Vec<Vec<NodeId>> = match self.executor {
            Executor::Batched => waves(&self.graph),
            _ => self.graph.nodes.iter().map(|n| vec![n.id]).collect(),
        };
        let estimates = device_estimates(&self.graph, &self.placement, &forwards, devices.count(), &sizes);
        for (device, estimate) in estimates.iter().enumerate() {
            let name = device_name(devices, device);
            match (limit, devices) {
                (Some(bytes), _) => estimate.check(&name, bytes)?,
                (None, d) if d.is_host() => estimate.check(&name, available_ram()?)?,
                (None, _) => {
                    eprintln!("note: no free-memory probe for {name}; pass --memory-limit to check")
                }
            }
        }
        Ok(())
    }

    /// One line about the run.
    pub fn describe(&self, schedule: ScheduleKind) -> String {
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
            schedule,
            c.stages,
            c.history,
            format!("{:?}", self.executor).to_lowercase(),
            self.placement.workers(),
            counts.forwards,
            counts.cache_update_forwards
        )
    }
}
