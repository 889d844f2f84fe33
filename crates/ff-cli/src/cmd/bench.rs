//! `flashforward bench`: runs several schedules and executors on one model in one process
//! (DESIGN §6) and prints model forward calls (the batched executor packs each wave into one),
//! denoising-path wall seconds, the ratio to FlashForward under
//! the same executor (streaming: to the FlashForward wavefront), time to first chunk and the peak
//! bytes held in one worker's K/V banks. Runs on the CPU (NdArray) or, in builds with the `cuda`
//! or `wgpu` feature, on GPUs (`--devices cuda:0,1,2,3`: worker w on device w mod N); absolute
//! times only mean something on a GPU.

use super::plan::{ContractArgs, parse_schedule};
use crate::backend::{BackendTask, DeviceSpec, Precision, dispatch};
use burn::tensor::{Distribution, Tensor};
use ff_model::AttentionBackend;
use ff_model::dit::{DitConfig, WanDit};
use ff_sched::exec::Placement;
use ff_sched::exec::{DitRunner, NoiseSpec, execute, execute_batched};
use ff_sched::{Graph, ScheduleKind};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Model preset: tiny, small, 1.3b, 14b.
    #[arg(long, default_value = "tiny")]
    pub config: String,
    /// Use random weights (the only mode: bench measures schedules, not quality).
    #[arg(long, required = true)]
    pub random_weights: bool,
    /// Seed of the weights, prompt embedding and noise.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    #[command(flatten)]
    pub contract: ContractArgs,
    /// Latent height and width.
    #[arg(long, default_value_t = 8)]
    pub height: usize,
    #[arg(long, default_value_t = 8)]
    pub width: usize,
    /// Prompt tokens of the random text embedding.
    #[arg(long, default_value_t = 16)]
    pub text_tokens: usize,
    /// Schedules to run.
    #[arg(long, value_delimiter = ',', value_parser = parse_schedule,
          default_value = "flashforward,self-forcing,hiar,n-c-causal-rcm,bidirectional")]
    pub schedules: Vec<ScheduleKind>,
    /// Executors: serial, wavefront (one worker per stage), streaming (plus a planner worker),
    /// batched (one worker, each dependency wave as one packed forward).
    #[arg(long, value_delimiter = ',', default_value = "serial,wavefront,streaming,batched")]
    pub executors: Vec<String>,
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

/// A DiT preset by name (for `--config`/`--configs`/`--model`).
pub fn preset(name: &str) -> anyhow::Result<DitConfig> {
    DitConfig::preset(name).ok_or_else(|| anyhow::anyhow!("unknown DiT preset '{name}' ({})", DitConfig::PRESETS.join(", ")))
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
        "batched" => Some(Executor::Batched),
        other => anyhow::bail!("--executors: unknown executor '{other}' (serial, wavefront, streaming, batched)"),
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
    peak_bank_bytes: usize,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let rows = dispatch(&args.devices, args.precision, Bench(&args))?;
    print(&args, &rows);
    Ok(ExitCode::SUCCESS)
}

struct Bench<'a>(&'a Args);

impl BackendTask for Bench<'_> {
    type Output = Vec<Row>;
    fn run<B: AttentionBackend>(self, devices: Vec<B::Device>) -> anyhow::Result<Vec<Row>> {
        bench::<B>(self.0, &devices)
    }
}

fn bench<B: AttentionBackend>(args: &Args, devices: &[B::Device]) -> anyhow::Result<Vec<Row>> {
    let device = devices[0].clone();
    let config = preset(&args.config)?;
    <B as burn::tensor::backend::Backend>::seed(&device, args.seed);
    let model: WanDit<B> = config.init(&device);
    let text = Tensor::<B, 3>::random([1, args.text_tokens, config.text_dim], Distribution::Normal(0.0, 1.0), &device);
    let contract = args.contract.contract()?;
    let noise = NoiseSpec { seed: args.seed, channels: config.in_channels, height: args.height, width: args.width };
    let runner = DitRunner::new(&model, text, &contract, noise);
    if let Some(dir) = &args.trace {
        std::fs::create_dir_all(dir).map_err(|e| anyhow::anyhow!("--trace {}: {e}", dir.display()))?;
    }
    let mut rows: Vec<Row> = Vec::new();
    for &schedule in &args.schedules {
        let graph = schedule.build(&contract)?;
        for executor in &args.executors {
            let Some(how) = self::executor(executor, &graph)? else { continue };
            let t = Instant::now();
            let e = match how {
                Executor::Placed(p) => {
                    execute(&graph, &p, (0..p.workers()).map(|w| runner.to_device(&devices[w % devices.len()])).collect())?
                }
                Executor::Batched => execute_batched(&graph, runner.clone())?,
            };
            for d in devices {
                B::sync(d).map_err(|e| anyhow::anyhow!("device sync: {e:?}"))?;
            }
            let wall_seconds = t.elapsed().as_secs_f64();
            if let Some(dir) = &args.trace {
                e.trace.write(&graph, &dir.join(format!("{schedule}-{executor}.json")))?;
            }
            rows.push(Row {
                schedule: schedule.name(),
                executor: executor.clone(),
                workers: e.trace.workers,
                forwards: e.forwards,
                wall_seconds,
                ratio_to_flashforward: None,
                ttff_seconds: e.trace.ttff(&graph),
                peak_bank_bytes: e.peak_bank_bytes.iter().copied().max().unwrap_or(0),
            });
        }
    }
    let reference = |executor: &str| {
        let executor = match executor {
            "streaming" => "wavefront",
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

fn print(args: &Args, rows: &[Row]) {
    if args.json {
        for r in rows {
            println!("{}", serde_json::to_string(r).expect("row serialises"));
        }
        return;
    }
    let c = &args.contract;
    println!(
        "config {} (random weights, seed {}), L = {}, S = {}, latent {}×{}",
        args.config, args.seed, c.latents, c.knobs.stages, args.height, args.width
    );
    println!("| schedule | executor | workers | forwards | wall s | ratio to FF | TTFF s | peak bank KiB |");
    println!("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |");
    for r in rows {
        let ratio = r.ratio_to_flashforward.map_or("-".to_string(), |x| format!("{x:.2}"));
        println!(
            "| {} | {} | {} | {} | {:.3} | {} | {:.3} | {:.1} |",
            r.schedule,
            r.executor,
            r.workers,
            r.forwards,
            r.wall_seconds,
            ratio,
            r.ttff_seconds,
            r.peak_bank_bytes as f64 / 1024.0
        );
    }
}
