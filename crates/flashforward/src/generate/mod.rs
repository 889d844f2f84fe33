//! [`Pipeline`]: a model loaded on its devices, and the generation itself. A request is planned
//! ([`crate::plan`]), its prompt encoded on the CPU (then the encoder is dropped), and the
//! schedule's graph run on the executor's workers while each finished chunk is decoded by the
//! streaming VAE decoder and handed to the caller in video order, as later chunks still denoise.
//!
//! Timing (from the moment the executor starts, after text encoding): the denoising path is the
//! executor's makespan (first forward to final latents, no VAE); TTFF (time to first frames) is
//! when the first decoded frames have been handed over; total is when the last ones have.
//! Decoding overlaps denoising and runs on device 0, so on a single device the two share it.

mod euler;
mod splice;
mod stream;

use std::ops::{ControlFlow, Range};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::mpsc::channel;
use std::time::{Duration, Instant};

use burn::tensor::Tensor;
use ff_model::AttentionBackend;
use ff_model::text::PromptEmbedding;
use ff_model::vae::WanVae;
use ff_sched::exec::{Across, DitRunner, LiveSource, NoiseSpec, Prompts, Roles, execute, execute_batched};

use self::splice::Splice;
use self::stream::{Finished, InOrder, Stop, Streamed};
use crate::error::{Context, Error, Result};
use crate::executor::{Executor, device_of, planner_shards};
use crate::model::Model;
use crate::model::served::{ServedDit, load_served};
use crate::plan::Plan;
use crate::prompt::{self, Source};
use crate::request::Request;
use crate::switch::{LiveSwitch, Segment, position_seconds};
use crate::video::{FPS, Frame, Video, frames_from_tensor_data};

/// A model's DiT and VAE loaded on devices, ready to generate any number of requests.
///
/// ```no_run
/// use flashforward::{Pipeline, Request};
/// let device = Default::default();
/// let pipe = Pipeline::<flashforward::Cpu>::load(flashforward::default_model_dir()?, &device)?;
/// let video = pipe.generate(&Request::new("a red circle bounces").seconds(5.0).seed(0))?;
/// video.write_mp4("x.mp4")?;
/// # Ok::<(), flashforward::Error>(())
/// ```
pub struct Pipeline<B: AttentionBackend> {
    model: Model,
    devices: Vec<B::Device>,
    dit: ServedDit<B>,
    vae: WanVae<B>,
    load: Duration,
}

/// One decoded chunk, handed to [`Pipeline::generate_with`]'s callback in video order.
#[derive(Debug)]
pub struct Chunk<'a> {
    /// The chunk's index in video order (0, 1, ...).
    pub index: usize,
    /// Output chunks of the whole video.
    pub chunks: usize,
    /// Its frames, at [`FPS`].
    pub frames: &'a [Frame],
    /// Index of its first frame in the video.
    pub first_frame: usize,
    /// Its latent positions.
    pub latents: Range<usize>,
    /// The prompt it was made under, as the model read it (the request's, or a switch's).
    pub prompt: &'a str,
    /// Time since the executor started.
    pub elapsed: Duration,
}

/// What a generation reports.
#[derive(Debug, Clone)]
pub struct Report {
    /// The plan that ran.
    pub plan: Plan,
    /// Frames handed over (all of them unless stopped).
    pub frames: usize,
    /// Prompt encoding (or the prompt cache read).
    pub text: Duration,
    /// Where the prompt's embedding came from.
    pub text_source: Source,
    /// The denoising path: first forward to final latents.
    pub denoise: Duration,
    /// Time to first frames.
    pub first_frames: Option<Duration>,
    /// Until the last frames were handed over.
    pub total: Duration,
    /// DiT forwards run.
    pub forwards: usize,
    /// Busy seconds of the slowest worker.
    pub slowest_worker: f64,
    /// Peak K/V bank bytes per worker.
    pub peak_bank_bytes: Vec<usize>,
    /// Why the generation stopped early (the stop flag, or the callback's `Break`).
    pub stopped: Option<String>,
    /// The prompt of each stretch of the video, in order: one, or one more per switch applied
    /// (a live switch applied after the last chunk started is listed past the video's end).
    pub segments: Vec<Segment>,
}

impl<B: AttentionBackend> Pipeline<B> {
    /// Loads the model folder `dir` (either layout, or an exported student) on `device`.
    pub fn load(dir: impl Into<PathBuf>, device: &B::Device) -> Result<Self> {
        Self::load_on(Model::open_dir(dir)?, std::slice::from_ref(device))
    }

    /// Loads `model` for `devices`: the DiT and VAE on the first; each worker's role models are
    /// copied to its device (worker `w` on `devices[w mod n]`) when a generation starts.
    pub fn load_on(model: Model, devices: &[B::Device]) -> Result<Self> {
        let Some(main) = devices.first() else { crate::error::invalid!("a pipeline needs at least one device") };
        let start = Instant::now();
        let dit = load_served::<B>(&model.configs.dit, &model.files.dit, main)?;
        let vae = {
            let _span = tracing::info_span!("load_vae", path = %model.files.vae.display()).entered();
            WanVae::<B>::load(&model.files.vae, &model.configs.vae, main)
                .with_context(|| format!("cannot load the VAE from {}", model.files.vae.display()))?
        };
        let load = start.elapsed();
        tracing::info!(seconds = load.as_secs_f64(), "models loaded");
        Ok(Self { model, devices: devices.to_vec(), dit, vae, load })
    }

    /// The model's files, configs and manifest.
    pub fn model(&self) -> &Model {
        &self.model
    }

    /// How long loading the DiT and the VAE took.
    pub fn load_time(&self) -> Duration {
        self.load
    }

    /// The plan of `request` on this pipeline's devices (checks only; nothing runs).
    pub fn plan(&self, request: &Request) -> Result<Plan> {
        self.model.plan(request, self.devices.len())
    }

    /// The text the encoder reads for `prompt`, or why this model refuses it (a word outside a
    /// small-world student's vocabulary, named; too many tokens): what a live switch is checked
    /// with ([`LiveSwitch`]).
    pub fn check_prompt(&self, prompt: &str) -> Result<String> {
        self.model.check_prompt(prompt)
    }

    /// Generates `request` and returns the whole video.
    pub fn generate(&self, request: &Request) -> Result<Video> {
        let mut frames = Vec::new();
        let report = self.generate_with(request, |chunk| {
            frames.extend_from_slice(chunk.frames);
            ControlFlow::Continue(())
        })?;
        Ok(Video::new(frames, FPS, report))
    }

    /// Generates `request`, calling `on_chunk` with each decoded chunk in video order; returning
    /// `ControlFlow::Break` stops the workers at their next forward (the report then says so).
    pub fn generate_with(&self, request: &Request, on_chunk: impl FnMut(Chunk) -> ControlFlow<()>) -> Result<Report> {
        let plan = self.plan(request)?;
        let _span = tracing::info_span!("generate", schedule = %plan.graph.schedule, latents = plan.length.latents).entered();
        let text_start = Instant::now();
        let cache = request.prompt_cache.as_deref();
        let (embedding, text_source) = prompt::embed(&plan.text, &plan.prompt, cache)?;
        let negative = match &plan.negative_prompt {
            Some(negative) => Some(prompt::embed(&plan.text, negative, cache)?.0),
            None => None,
        };
        let main = &self.devices[0];
        let mut prompts = Prompts::single(plan.prompt.clone(), self.context(&embedding, main)?);
        for switch in &plan.switches {
            let (embedding, _) = prompt::embed(&plan.text, &switch.prompt, cache)?;
            prompts = prompts.switch(switch.position, switch.prompt.clone(), self.context(&embedding, main)?);
        }
        let policy = request.switch_policy;
        let across = Across { anchors: policy.anchors, history: policy.history };
        if across != Across::default() {
            prompts = prompts.across(&plan.graph, across);
        }
        if let Some(live) = &request.live {
            let source = LiveEncoder {
                pipe_model: self.model.clone(),
                handle: live.clone(),
                cache: request.prompt_cache.clone(),
                device: main.clone(),
            };
            prompts = prompts.live(std::sync::Arc::new(source));
        }
        let text = text_start.elapsed();
        let stop = Stop { interrupt: request.stop.clone().unwrap_or_default(), abort: Default::default() };
        let run = Run { pipe: self, plan: &plan, request, prompt: &embedding, prompts: prompts.clone(), negative: negative.as_ref(), stop };
        let outcome = match request.teacher {
            Some(_) => euler::generate(&run, on_chunk)?,
            None => run.schedule(on_chunk)?,
        };
        let segments = prompts
            .segments()
            .into_iter()
            .map(|s| Segment {
                first_latent: s.start,
                start_seconds: position_seconds(s.start),
                prompt: prompts.name(s.prompt).unwrap_or_default(),
            })
            .collect();
        Ok(Report {
            plan,
            text,
            text_source,
            frames: outcome.frames,
            denoise: outcome.denoise,
            first_frames: outcome.first_frames,
            total: outcome.total,
            forwards: outcome.forwards,
            slowest_worker: outcome.slowest_worker,
            peak_bank_bytes: outcome.peak_bank_bytes,
            stopped: outcome.stopped,
            segments,
        })
    }

    /// A prompt's embedding as DiT context `[1, text_tokens, text_dim]` on `device`.
    fn context(&self, embedding: &PromptEmbedding, device: &B::Device) -> Result<Tensor<B, 3>> {
        Ok(embedding.to_context::<B>(self.model.configs.dit.text_len, device)?.unsqueeze())
    }
}

/// Reads, checks and encodes the prompts of a [`LiveSwitch`] when a worker polls it.
struct LiveEncoder<B: AttentionBackend> {
    pipe_model: Model,
    handle: LiveSwitch,
    cache: Option<PathBuf>,
    device: B::Device,
}

impl<B: AttentionBackend> LiveSource<B> for LiveEncoder<B> {
    fn take(&self) -> Option<std::result::Result<(String, Tensor<B, 3>), String>> {
        let asked = self.handle.take()?;
        let encoded = (|| {
            let read = self.pipe_model.check_prompt(&asked)?;
            let files = self.pipe_model.text_files();
            let (embedding, _) = prompt::embed(&files, &read, self.cache.as_deref())?;
            let context = embedding.to_context::<B>(self.pipe_model.configs.dit.text_len, &self.device)?.unsqueeze();
            Ok::<_, Error>((read, context))
        })();
        Some(encoded.map_err(|e| format!("'{asked}': {e}")))
    }
}

/// One generation in progress.
struct Run<'a, B: AttentionBackend> {
    pipe: &'a Pipeline<B>,
    plan: &'a Plan,
    request: &'a Request,
    prompt: &'a PromptEmbedding,
    /// Every prompt of the run and where each applies (the runners share it).
    prompts: Prompts<B>,
    negative: Option<&'a PromptEmbedding>,
    stop: Stop,
}

/// What the generation loop measured.
#[derive(Default)]
struct Outcome {
    frames: usize,
    denoise: Duration,
    first_frames: Option<Duration>,
    total: Duration,
    forwards: usize,
    slowest_worker: f64,
    peak_bank_bytes: Vec<usize>,
    stopped: Option<String>,
}

impl<B: AttentionBackend> Run<'_, B> {
    /// The prompt (or negative prompt) as DiT context on `device`.
    fn context(&self, embedding: &PromptEmbedding, device: &B::Device) -> Result<Tensor<B, 3>> {
        self.pipe.context(embedding, device)
    }

    /// The DiT runner (model, prompt context, noise) on device 0.
    fn runner(&self) -> Result<DitRunner<B>> {
        let main = &self.pipe.devices[0];
        let [height, width] = self.plan.latent_size;
        let noise = NoiseSpec { seed: self.request.seed, channels: self.pipe.model.configs.dit.in_channels, height, width };
        let contract = &self.plan.graph.contract;
        let context = self.context(self.prompt, main)?;
        let runner = match &self.pipe.dit {
            ServedDit::One(dit) => DitRunner::new(dit, context, contract, noise),
            ServedDit::Roles { planner, renderer } => {
                DitRunner::from_role_models((**planner).clone(), (**renderer).clone(), context, contract, noise)
            }
        };
        let runner = runner.with_prompts(self.prompts.clone());
        Ok(match self.negative.filter(|_| contract.planner_guided()) {
            Some(negative) => runner.with_empty_prompt(self.context(negative, main)?),
            None => runner,
        })
    }

    /// Runs the plan's graph on its executor (see the module docs).
    fn schedule(&self, mut on_chunk: impl FnMut(Chunk) -> ControlFlow<()>) -> Result<Outcome> {
        let (pipe, plan, stop) = (self.pipe, self.plan, &self.stop);
        let (devices, graph, placement) = (&pipe.devices, &plan.graph, &plan.placement);
        let main = &devices[0];
        let base = self.runner()?;
        let (tx, rx) = channel::<Finished<Tensor<B, 5>>>();
        // One model copy per device and role its workers run, shared by those workers.
        let workers = placement.workers();
        let per_device: Vec<DitRunner<B>> = devices
            .iter()
            .enumerate()
            .map(|(d, device)| {
                let on_device: Vec<usize> = (0..workers).filter(|&w| device_of(w, devices.len()) == d).collect();
                base.for_roles(Roles::of_workers(graph, placement, &on_device)).to_device(device)
            })
            .collect();
        let mut shards = planner_shards::<B>(placement, devices).into_iter();
        let runners: Vec<_> = (0..workers)
            .map(|w| {
                let runner = per_device[device_of(w, devices.len())].clone();
                let runner = match shards.next() {
                    Some(end) => runner.with_planner_shard(end),
                    None => runner,
                };
                Streamed::new(runner, w, tx.clone(), stop.clone())
                    .with_splice(self.request.splice)
                    .with_hook(self.request.on_forward.clone())
            })
            .collect();
        drop((per_device, tx, base));
        let mut decoder = pipe.vae.stream_decoder();
        let mut order = InOrder::default();
        let mut splice = self.request.splice.then(|| Splice::<B>::new(&graph.contract.anchors));
        let chunks = graph.outputs().len();
        let (mut index, mut frames, mut first_frames) = (0, 0, None);
        let start = Instant::now();
        let (execution, handed) = std::thread::scope(|s| {
            let executor = s.spawn(|| {
                let mut runners = runners;
                if plan.executor == Executor::Batched {
                    // The batched executor's placement is serial: one runner.
                    execute_batched(graph, runners.swap_remove(0))
                } else {
                    execute(graph, placement, runners)
                }
            });
            let mut hand = |done: Finished<Tensor<B, 5>>| -> Result<()> {
                let decoded = {
                    let _span = tracing::debug_span!("decode", chunk = index).entered();
                    decoder.decode_chunk(pipe.vae.denormalize(done.latent.to_device(main)))?
                };
                let decoded = frames_from_tensor_data(decoded.into_data())?;
                let latents = done.positions[0]..done.positions[0] + done.positions.len();
                let elapsed = start.elapsed();
                let prompt = self.prompts.name(self.prompts.at(latents.start)).unwrap_or_default();
                let chunk = Chunk { index, chunks, frames: &decoded, first_frame: frames, latents, prompt: &prompt, elapsed };
                let flow = on_chunk(chunk);
                first_frames.get_or_insert(elapsed);
                (index, frames) = (index + 1, frames + decoded.len());
                if flow.is_break() {
                    stop.abort.store(true, Ordering::SeqCst);
                }
                Ok(())
            };
            // Receiving ends when every worker has dropped its sender, i.e. the executor returned.
            // Once stopped no further chunk is handed over: the workers stop at their next forward,
            // and the chunks still arriving are dropped.
            let handed = rx.iter().try_for_each(|done| {
                let outputs = match &mut splice {
                    Some(splice) => splice.push(done),
                    None => vec![done],
                };
                outputs.into_iter().flat_map(|d| order.push(d)).take_while(|_| !stop.stopped()).try_for_each(&mut hand)
            });
            if handed.is_err() {
                stop.abort.store(true, Ordering::SeqCst);
                rx.iter().for_each(drop);
            }
            let execution = executor.join().map_err(|_| Error::Invalid("the executor thread panicked".into()));
            (execution, handed)
        });
        let total = start.elapsed();
        handed?;
        let mut outcome = Outcome { frames, first_frames, total, ..Default::default() };
        match execution? {
            Err(e) if stop.stopped() => {
                outcome.denoise = total;
                outcome.stopped = Some(stop.reason().unwrap_or_else(|| e.to_string()));
            }
            Err(e) => return Err(e).context("the executor failed"),
            Ok(execution) => {
                outcome.slowest_worker = execution.trace.busy().into_iter().fold(0.0, f64::max);
                outcome.denoise = Duration::from_secs_f64(execution.trace.makespan());
                outcome.forwards = execution.forwards;
                outcome.peak_bank_bytes = execution.peak_bank_bytes;
                // Stopped after the last forward, while chunks were still being decoded.
                outcome.stopped = stop.reason();
                let want = graph.contract.config.latents;
                if outcome.stopped.is_none() && order.done() != want {
                    crate::error::invalid!("the executor finished {} of {want} latents", order.done());
                }
            }
        }
        Ok(outcome)
    }
}
