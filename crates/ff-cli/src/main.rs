//! The `flashforward` command-line tool.

mod cmd;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "flashforward", version, about = "FlashForward autoregressive video diffusion in Rust")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Build a schedule's generation graph and print its forward counts and rounds.
    Plan(cmd::plan::Args),
    /// Replay a schedule's graph on N devices with a fixed per-forward cost.
    Simulate(cmd::simulate::Args),
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Plan(args) => cmd::plan::run(args),
        Command::Simulate(args) => cmd::simulate::run(args),
    }
}
