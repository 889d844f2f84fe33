//! `flashforward`: generate, benchmark, train and evaluate FlashForward video models.

mod backend;
mod cmd;
mod progress;
mod video;

use clap::{Parser, Subcommand};

/// CPU forwards allocate and free score matrices of tens of MB per layer; glibc's malloc hands
/// each back to the kernel (mmap/munmap, page faults: half the wall time of a CPU run), mimalloc
/// keeps them for reuse.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(name = "flashforward", version, about = "Fast autoregressive video diffusion with FlashForward")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Generate a video from a prompt.
    Generate(cmd::generate::Args),
    /// Check a reference fixture folder (made by make_fixtures.py) against the Rust model.
    VerifyFixture(cmd::verify_fixture::Args),
    /// Time the DiT chunk forward (tokens/s, share outside matmul/attention).
    BenchDit(cmd::bench_dit::Args),
    /// Time block-sparse attention (dense mask, blockwise, kernel) on a packed or chunk layout.
    BenchAttention(cmd::bench_attention::Args),
    /// Build a schedule's generation graph and print its forward counts and rounds.
    Plan(cmd::plan::Args),
    /// Replay a schedule's graph on N devices with a fixed per-forward cost.
    Simulate(cmd::simulate::Args),
    /// Run several schedules and executors on one random-weight model and compare them.
    Bench(cmd::bench::Args),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Generate(args) => cmd::generate::run(args),
        Command::VerifyFixture(args) => cmd::verify_fixture::run(args),
        Command::BenchDit(args) => cmd::bench_dit::run(args),
        Command::BenchAttention(args) => cmd::bench_attention::run(args),
        Command::Plan(args) => cmd::plan::run(args),
        Command::Simulate(args) => cmd::simulate::run(args),
        Command::Bench(args) => cmd::bench::run(args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::from(2)
        }
    }
}
