//! `flashforward bench schedules`: runs several schedules and executors on one random-weight model in one
//! process (docs/ARCHITECTURE.md §9) and prints, per row: model forward calls (the batched executor packs each
//! wave into one), denoising-path wall seconds, the ratio to FlashForward under the same executor
//! (streaming: to the FlashForward wavefront), time to first chunk, the slowest worker's busy
//! seconds, and K/V memory (the worst worker's peak, and per device the sum of its workers'
//! peaks). Runs on the CPU (NdArray) or, in builds with the `cuda` or `wgpu` feature, on GPUs
//! (`--devices cuda:0,1,2,3`: worker w on device w mod N); absolute times only mean something on
//! a GPU.
//!
//! Fairness: every row first runs `--warmup` untimed times (kernel compilation, autotuning and
//! allocator pools are paid there); the runners are moved to their devices and cloned before the
//! clock starts, and every device is synchronised before it stops.

use crate::backend::{BackendTask, DeviceSpec, Precision, dispatch};
use crate::schedule::{ContractArgs, parse_schedule, preset};
use burn::tensor::{Distribution, Tensor};
use ff_model::AttentionBackend;
use ff_model::dit::WanDit;
use ff_model::vae::WanVaeConfig;
use ff_sched::exec::{DitRunner, Execution, NoiseSpec, Placement, execute, execute_batched};
use ff_sched::{Graph, ScheduleKind};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Model preset: tiny, small, 1.3b, 14b (random weights: bench measures schedules, not
    /// quality).
    #[arg(long, default_value = "tiny")]
    pub config: String,
    /// Seed of the weights, prompt embedding and noise.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    #[command(flatten)]
    pub contract: ContractArgs,
    /// Frame height in pixels, as for `generate` (a multiple of 16: the Wan VAE's 8 × the DiT
    /// patch 2); the DiT runs on height/8 latent rows.
    #[arg(long, default_value_t = 64)]
    pub height: usize,
    /// Frame width in pixels (a multiple of 16, like --height).
    #[arg(long, default_value_t = 64)]
    pub width: usize,
    /// Prompt tokens of the random text embedding.
    #[arg(long, default_value_t = 16)]
    pub text_tokens: usize,
    /// Schedules to run.
    #[arg(long, value_delimiter = ',', value_parser = parse_schedule,
          default_value = "flashforward,self-forcing,hiar,n-c-causal-rcm,bidirectional")]
    pub schedules: Vec<ScheduleKind>,
    /// Executors: serial, wavefront (one worker per stage), streaming (plus a planner worker),
    /// wavefront-cp (the wavefront with every planner forward sharded over the stage workers,
    /// FlashForward-CP), batched (one worker, each dependency wave as one packed forward).
    #[arg(long, value_delimiter = ',', default_value = "serial,wavefront,streaming,batched")]
    pub executors: Vec<String>,
    /// Untimed runs of every row before its timed run.
    #[arg(long, default_value_t = 1)]
    pub warmup: usize,
    /// Devices: cpu, cuda:0,1,2,3 or wgpu:0 (worker w runs on device w mod N).
    #[arg(long, default_value = "cpu")]
    pub devices: DeviceSpec,
    #[arg(long, value_enum, default_value = "f32")]
    pub precision: Precision,
    /// Folder for one Chrome trace + SVG wavefront chart per row.
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Print JSON lines instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// How a row runs: threads placed by a [`Placement`], or the batched diagonal executor.
enum Executor {
    Placed(Placement),
    Batched,
}

/// The executor named `name` for `graph` (None: not applicable, e.g. streaming without a planner).
fn executor(name: &str, graph: &Graph) -> anyhow::Result<Option<Executor>> {
    let stages = graph.contract.stages();
    let has_planner = graph.nodes.iter().any(|n| n.kind.is_planner());
    Ok(match name {
        "serial" => Some(Executor::Placed(Placement::serial())),
        "wavefront" => Some(Executor::Placed(Placement::wavefront(stages))),
        "streaming" => has_planner.then(|| Executor::Placed(Placement::streaming(stages))),
        "wavefront-cp" => has_planner.then(|| Executor::Placed(Placement::context_parallel(stages))),
        "batched" => Some(Executor::Batched),
        other => anyhow::bail!("--executors: unknown executor '{other}' (serial, wavefront, streaming, wavefront-cp, batched)"),
    })
}

#[derive(serde::Serialize)]
struct Row {
    schedule: &'static str,
    executor: String,
    workers: usize,
    forwards: usize,
    wall_seconds: f64,
    ratio_to_flashforward: Option<f64>,
    ttff_seconds: f64,
    slowest_worker_busy_seconds: f64,
    /// The largest peak of live K/V bytes among the row's workers.
    worst_worker_kv_bytes: usize,
    /// Per device, the sum of the peaks of the workers placed on it (an upper bound: the
    /// workers' peaks need not coincide).
    kv_bytes_per_device: Vec<usize>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let latent = latent_size(&args)?;
    let rows = dispatch(&args.devices, args.precision, Bench { args: &args, latent })?;
    print(&args, latent, &rows);
    Ok(ExitCode::SUCCESS)
}

/// Latent height and width of `--height`/`--width` pixels: the Wan VAE's spatial factor, and
/// divisible by the DiT's patch.
fn latent_size(args: &Args) -> anyhow::Result<[usize; 2]> {
    let [_, ph, pw] = preset(&args.config)?.patch_size;
    let factor = WanVaeConfig::wan2_1().spatial_factor();
    for (flag, pixels, patch) in [("--height", args.height, ph), ("--width", args.width, pw)] {
        let step = factor * patch;
        if pixels == 0 || !pixels.is_multiple_of(step) {
            anyhow::bail!("{flag} {pixels} must be a positive multiple of {step} pixels (VAE factor {factor} × DiT patch {patch})");
        }
    }
    Ok([args.height / factor, args.width / factor])
}

struct Bench<'a> {
    args: &'a Args,
    latent: [usize; 2],
}

impl BackendTask for Bench<'_> {
    type Output = Vec<Row>;
    fn run<B: AttentionBackend>(self, devices: Vec<B::Device>) -> anyhow::Result<Vec<Row>> {
        bench::<B>(self.args, self.latent, &devices)
    }
}

/// Runs `graph` once with `how`: runners are prepared (moved, cloned) before the clock starts,
/// and the clock stops after every device is synchronised. Returns the execution and its
/// wall seconds.
fn timed<B: AttentionBackend>(
    graph: &Graph,
    how: &Executor,
    runner: &DitRunner<B>,
    devices: &[B::Device],
) -> anyhow::Result<(Execution<Tensor<B, 5>>, f64)> {
    let sync = || -> anyhow::Result<()> {
        for d in devices {
            B::sync(d).map_err(|e| anyhow::anyhow!("device sync: {e:?}"))?;
        }
        Ok(())
    };
    let runners: Vec<DitRunner<B>> = match how {
        Executor::Placed(p) => {
            let mut shards = flashforward::executor::planner_shards::<B>(p, devices).into_iter();
            (0..p.workers())
                .map(|w| {
                    let runner = runner.to_device(&devices[w % devices.len()]);
                    match shards.next() {
                        Some(end) => runner.with_planner_shard(end),
                        None => runner,
                    }
                })
                .collect()
        }
        Executor::Batched => vec![runner.clone()],
    };
    sync()?;
    let t = Instant::now();
    let e = match how {
        Executor::Placed(p) => execute(graph, p, runners)?,
        Executor::Batched => execute_batched(graph, runners.into_iter().next().expect("one runner"))?,
    };
    sync()?;
    Ok((e, t.elapsed().as_secs_f64()))
}

fn bench<B: AttentionBackend>(args: &Args, [height, width]: [usize; 2], devices: &[B::Device]) -> anyhow::Result<Vec<Row>> {
    let device = devices[0].clone();
    let config = preset(&args.config)?;
    <B as burn::tensor::backend::Backend>::seed(&device, args.seed);
    let model: WanDit<B> = config.init(&device);
    let text = || Tensor::<B, 3>::random([1, args.text_tokens, config.text_dim], Distribution::Normal(0.0, 1.0), &device);
    let contract = args.contract.contract()?;
    let noise = NoiseSpec { seed: args.seed, channels: config.in_channels, height, width };
    // A random prompt, and a random "empty" one for guided planner steps (`--planner-guidance`).
    let runner = DitRunner::new(&model, text(), &contract, noise).with_empty_prompt(text());
    let mut rows: Vec<Row> = Vec::new();
    for &schedule in &args.schedules {
        let graph = schedule.build(&contract)?;
        for executor in &args.executors {
            let Some(how) = self::executor(executor, &graph)? else { continue };
            for _ in 0..args.warmup {
                timed(&graph, &how, &runner, devices)?;
            }
            let (e, wall_seconds) = timed(&graph, &how, &runner, devices)?;
            if let Some(dir) = &args.trace {
                e.trace.write(&graph, executor, &dir.join(format!("{schedule}-{executor}.json")))?;
            }
            let mut kv_bytes_per_device = vec![0; devices.len()];
            for (w, bytes) in e.peak_bank_bytes.iter().enumerate() {
                kv_bytes_per_device[w % devices.len()] += bytes;
            }
            rows.push(Row {
                schedule: schedule.name(),
                executor: executor.clone(),
                workers: e.trace.workers,
                forwards: e.forwards,
                wall_seconds,
                ratio_to_flashforward: None,
                ttff_seconds: e.trace.ttff(&graph),
                slowest_worker_busy_seconds: e.trace.busy().into_iter().fold(0.0, f64::max),
                worst_worker_kv_bytes: e.peak_bank_bytes.iter().copied().max().unwrap_or(0),
                kv_bytes_per_device,
            });
        }
    }
    let reference = |executor: &str| {
        let executor = match executor {
            "streaming" | "wavefront-cp" => "wavefront",
            other => other,
        };
        rows.iter().find(|r| r.schedule == "flashforward" && r.executor == executor).map(|r| r.wall_seconds)
    };
    let refs: Vec<Option<f64>> = rows.iter().map(|r| reference(&r.executor)).collect();
    for (row, base) in rows.iter_mut().zip(refs) {
        row.ratio_to_flashforward = base.map(|b| row.wall_seconds / b);
    }
    Ok(rows)
}

fn print(args: &Args, [lh, lw]: [usize; 2], rows: &[Row]) {
    if args.json {
        for r in rows {
            println!("{}", serde_json::to_string(r).expect("row serialises"));
        }
        return;
    }
    let c = &args.contract;
    let stages = c.contract().map_or(0, |contract| contract.stages());
    println!(
        "config {} (random weights, seed {}), L = {}, S = {}, {}×{} px (latent {lh}×{lw}), {} untimed warm-up run(s) per row",
        args.config, args.seed, c.latents, stages, args.height, args.width, args.warmup
    );
    println!(
        "| schedule | executor | workers | forwards | wall s | ratio to FF | TTFF s | slowest worker busy s | worst worker K/V KiB | K/V per device KiB |"
    );
    println!("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    let kib = |b: usize| format!("{:.1}", b as f64 / 1024.0);
    for r in rows {
        let ratio = r.ratio_to_flashforward.map_or("-".to_string(), |x| format!("{x:.2}"));
        let per_device: Vec<String> = r.kv_bytes_per_device.iter().map(|b| kib(*b)).collect();
        println!(
            "| {} | {} | {} | {} | {:.3} | {} | {:.3} | {:.3} | {} | {} |",
            r.schedule,
            r.executor,
            r.workers,
            r.forwards,
            r.wall_seconds,
            ratio,
            r.ttff_seconds,
            r.slowest_worker_busy_seconds,
            kib(r.worst_worker_kv_bytes),
            per_device.join(" / ")
        );
    }
    println!(
        "wall s: denoising path (first forward to final latents), runners already on their devices. \
         worst worker K/V: the largest peak of live K/V bytes of one worker. K/V per device: the sum \
         of the peaks of the workers on each device (an upper bound; model weights not included)."
    );
}
