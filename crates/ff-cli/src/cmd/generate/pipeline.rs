//! The generation itself on backend `B`: load the DiT and the VAE, run the schedule's graph on
//! the executor's workers, and decode each finished chunk with the streaming VAE decoder into the
//! video sink while later chunks are still denoising.
//!
//! Timing (all from the moment the executor starts, after text encoding and model loading):
//! denoising-path latency is the executor's makespan (first forward to final latents, no VAE);
//! TTFF is when the first decoded frames are on disk; total is when the last ones are. Decoding
//! overlaps denoising and runs on device 0, so on a single device the two share it (the `bench`
//! command measures schedules without the VAE).

use ff_model::AttentionBackend;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::mpsc::channel;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow};
use burn::tensor::Tensor;
use ff_model::dit::DitConfig;
use ff_model::text::PromptEmbedding;
use ff_model::vae::{WanVae, WanVaeConfig};
use ff_sched::Graph;
use ff_sched::exec::Placement;
use ff_sched::exec::{DitRunner, NoiseSpec, Roles, execute, execute_batched};
use ff_train::checkpoint::ServedDit;

use super::devices::device_of;
use super::splice::Splice;
use super::stream::{Finished, InOrder, Stop, Streamed};
use crate::progress::ChunkProgress;
use crate::video::{VideoSink, frames_from_tensor_data};

/// Everything one generation needs besides the prompt embedding and the video sink.
pub struct Job<'a> {
    pub graph: &'a Graph,
    pub placement: Placement,
    /// Run each dependency wave as one packed forward (one worker) instead of `placement`.
    pub batched: bool,
    pub dit: &'a Path,
    pub dit_config: &'a DitConfig,
    pub vae: &'a Path,
    pub vae_config: &'a WanVaeConfig,
    /// Latent height and width.
    pub latent_size: [usize; 2],
    pub seed: u64,
    /// Keep the planner's anchors in the output at the anchor positions (`--splice`).
    pub splice: bool,
    /// The empty prompt's embedding, which guided planner steps contrast with the prompt.
    pub empty: Option<&'a PromptEmbedding>,
}

/// What a finished (or interrupted) generation reports.
pub struct Outcome {
    /// The output path (or frame pattern); `None` when stopped before any frame was written.
    pub video: Option<PathBuf>,
    pub frames: usize,
    pub load: Duration,
    pub denoise: Duration,
    pub first_frames: Option<Duration>,
    pub total: Duration,
    /// Busy seconds of the slowest worker.
    pub slowest_worker: f64,
    /// Peak K/V bank bytes per worker.
    pub peak_bank_bytes: Vec<usize>,
    /// Why the executor stopped early (Ctrl-C).
    pub stopped: Option<String>,
}

/// The DiT runner (model, prompt context, noise) and the VAE of `job`, on `device`.
fn load_models<B: AttentionBackend>(job: &Job, text: &PromptEmbedding, device: &B::Device) -> Result<(DitRunner<B>, WanVae<B>)> {
    // A plain DiT checkpoint, a training run / checkpoint (its EMA roles over its base DiT), or
    // an exported student (its two merged role models).
    let dit = ff_train::checkpoint::load_served::<B>(job.dit_config, job.dit, device)
        .with_context(|| format!("cannot load the DiT from {}", job.dit.display()))?;
    let context: Tensor<B, 3> = text.to_context::<B>(job.dit_config.text_len, device)?.unsqueeze();
    let [height, width] = job.latent_size;
    let noise = NoiseSpec { seed: job.seed, channels: job.dit_config.in_channels, height, width };
    let contract = &job.graph.contract;
    let runner = match dit {
        ServedDit::One(dit) => DitRunner::new(&dit, context, contract, noise),
        ServedDit::Roles { planner, renderer } => DitRunner::from_role_models(*planner, *renderer, context, contract, noise),
    };
    let runner = match job.empty.filter(|_| contract.planner_guided()) {
        Some(empty) => runner.with_empty_prompt(empty.to_context::<B>(job.dit_config.text_len, device)?.unsqueeze()),
        None => runner,
    };
    let vae =
        WanVae::<B>::load(job.vae, job.vae_config, device).with_context(|| format!("cannot load the VAE from {}", job.vae.display()))?;
    Ok((runner, vae))
}

/// Runs `job` on `devices` (worker `w` on `devices[w mod n]`; the VAE on `devices[0]`), writing
/// the video into `sink`.
pub fn generate<B: AttentionBackend>(
    job: &Job,
    text: &PromptEmbedding,
    devices: &[B::Device],
    mut sink: VideoSink,
    stop: Stop,
) -> Result<Outcome> {
    let load_start = Instant::now();
    let main = &devices[0];
    let (base, vae) = load_models(job, text, main)?;
    let load = load_start.elapsed();

    let (tx, rx) = channel::<Finished<Tensor<B, 5>>>();
    // One model copy per device and role its workers run, shared by those workers.
    let workers = job.placement.workers();
    let per_device: Vec<DitRunner<B>> = devices
        .iter()
        .enumerate()
        .map(|(d, device)| {
            let on_device: Vec<usize> = (0..workers).filter(|&w| device_of(w, devices.len()) == d).collect();
            base.for_roles(Roles::of_workers(job.graph, &job.placement, &on_device)).to_device(device)
        })
        .collect();
    let runners: Vec<_> = (0..workers)
        .map(|w| Streamed::new(per_device[device_of(w, devices.len())].clone(), w, tx.clone(), stop.clone()).with_splice(job.splice))
        .collect();
    drop(per_device);
    drop((tx, base));
    let mut decoder = vae.stream_decoder();
    let mut order = InOrder::default();
    let mut splice = job.splice.then(|| Splice::<B>::new(&job.graph.contract.anchors));
    let mut progress = ChunkProgress::new(job.graph.outputs().len());
    let mut first_frames = None;
    let start = Instant::now();
    let (execution, written) = std::thread::scope(|s| {
        let executor = s.spawn(|| {
            let mut runners = runners;
            if job.batched {
                // The batched executor's placement is serial: one runner.
                execute_batched(job.graph, runners.swap_remove(0))
            } else {
                execute(job.graph, &job.placement, runners)
            }
        });
        let mut write = |done: Finished<Tensor<B, 5>>| -> Result<()> {
            let video = decoder.decode_chunk(vae.denormalize(done.latent.to_device(main)))?;
            sink.push_frames(&frames_from_tensor_data(video.into_data())?)?;
            first_frames.get_or_insert_with(|| start.elapsed());
            progress.chunk_done(done.positions.len());
            Ok(())
        };
        // Receiving ends when every worker has dropped its sender, i.e. the executor returned.
        // After Ctrl-C no further chunk is decoded: the workers stop at their next forward, and
        // the chunks still arriving are dropped.
        let written = rx.iter().try_for_each(|done| {
            let outputs = match &mut splice {
                Some(splice) => splice.push(done),
                None => vec![done],
            };
            outputs.into_iter().flat_map(|d| order.push(d)).take_while(|_| !stop.interrupted()).try_for_each(&mut write)
        });
        if written.is_err() {
            stop.abort.store(true, Ordering::SeqCst);
            rx.iter().for_each(drop);
        }
        let execution = executor.join().map_err(|_| anyhow!("the executor thread panicked"));
        (execution, written)
    });
    let total = start.elapsed();
    written?;
    let (denoise, slowest_worker, peak_bank_bytes, stopped) = match execution? {
        Err(e) if stop.interrupted() => {
            progress.abandon("interrupted");
            (total, 0.0, Vec::new(), Some(e.to_string()))
        }
        // Ctrl-C after the last forward, while chunks were still being decoded
        Ok(execution) if stop.interrupted() => {
            progress.abandon("interrupted");
            let slowest = execution.trace.busy().into_iter().fold(0.0, f64::max);
            let denoise = Duration::from_secs_f64(execution.trace.makespan());
            (denoise, slowest, execution.peak_bank_bytes, Some("interrupted (Ctrl-C)".to_string()))
        }
        Err(e) => {
            progress.abandon("failed");
            return Err(e).context("the executor failed");
        }
        Ok(execution) => {
            progress.finish();
            let want = job.graph.contract.config.latents;
            if order.done() != want {
                return Err(anyhow!("the executor finished {} of {want} latents", order.done()));
            }
            let slowest = execution.trace.busy().into_iter().fold(0.0, f64::max);
            (Duration::from_secs_f64(execution.trace.makespan()), slowest, execution.peak_bank_bytes, None)
        }
    };
    let frames = sink.frames_written();
    // Every chunk left the output complete and playable; a stopped run keeps what it finished.
    let video = if stopped.is_none() || frames > 0 { Some(sink.finish()?) } else { None };
    Ok(Outcome { video, frames, load, denoise, first_frames, total, slowest_worker, peak_bank_bytes, stopped })
}
