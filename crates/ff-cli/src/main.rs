//! `flashforward`: generate, benchmark, train and evaluate FlashForward video models.

mod alloc;
mod backend;
mod cmd;
mod encode;
mod logging;
mod progress;
mod schedule;
mod switch_flag;
mod world_dir;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "flashforward", version, about = "Fast autoregressive video diffusion with FlashForward")]
struct Cli {
    /// Show what the libraries do on stderr: -v info (loading, generation, training steps),
    /// -vv debug (each forward and decoded chunk), -vvv trace. RUST_LOG, when set, wins.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Generate a video from a prompt.
    #[command(after_help = "Model: without model flags, the default model is read: the small world's FlashForward \
                            student in the repository's models/world/ (or $FF_MODEL_DIR), 64×64 px at 16 FPS, its \
                            stage count, seed 0; its prompts use the small world's words (shapes, colours, \
                            backgrounds, motions). Wan2.1: --model-dir DIR (original or diffusers layout), or --hub \
                            to search the Hugging Face cache; single files with --dit, --vae, ... override either.\n\
                            Timings printed at the end: denoising path = first denoising forward to the final latents \
                            (no text encoding, no VAE); TTFF (time to first frames) = from the first forward until the \
                            first decoded frames are on disk; total with VAE = until the last ones are.\n\
                            Ctrl-C stops after the chunk being decoded, leaves a playable video of the finished frames \
                            and exits with status 130 (a second Ctrl-C quits at once).")]
    Generate(Box<cmd::generate::Args>),
    /// Encode captioned MP4 videos into a latent-clip dataset for training.
    EncodeVideos(cmd::encode_videos::Args),
    /// Check a reference fixture folder (made by make_fixtures.py) against the Rust model.
    VerifyFixture(cmd::verify_fixture::Args),
    /// Build a schedule's generation graph and print its forward counts and rounds.
    Plan(cmd::plan::Args),
    /// Replay a schedule's graph on N devices with a fixed per-forward cost.
    Simulate(cmd::simulate::Args),
    /// The project's GPU kernels as source (`kernels emit --target cuda --out DIR`).
    Kernels(cmd::kernels::Args),
    /// Benchmarks: schedules, the DiT forward, the VAE decode, attention, training steps.
    Bench(cmd::bench::Args),
    /// The small world's data: MP4 clips and captions, the text encoder, latent shards.
    World(cmd::world::Args),
    /// Measure videos: prompt accuracy, identity persistence, drift and seam statistics.
    Eval(cmd::eval::Args),
    /// Training: Phase 1 (`sft`), Phase 2 (`dmd`), the small world's codec and teacher.
    Train(cmd::train::Args),
    /// The small world's codec after `train vae`: export a run, measure reconstruction PSNR.
    Vae(cmd::vae::Args),
    /// A local web page that streams video as it is made (default: http://127.0.0.1:8080/).
    Serve(cmd::serve::Args),
}

fn main() -> std::process::ExitCode {
    alloc::keep_freed_pages();
    let cli = Cli::parse();
    logging::init(cli.verbose);
    let result = match cli.command {
        Command::Generate(args) => cmd::generate::run(*args),
        Command::EncodeVideos(args) => cmd::encode_videos::run(args),
        Command::VerifyFixture(args) => cmd::verify_fixture::run(args),
        Command::Plan(args) => cmd::plan::run(args),
        Command::Simulate(args) => cmd::simulate::run(args),
        Command::Bench(args) => cmd::bench::run(args),
        Command::Kernels(args) => cmd::kernels::run(args),
        Command::World(args) => cmd::world::run(args),
        Command::Eval(args) => cmd::eval::run(args),
        Command::Train(args) => cmd::train::run(args),
        Command::Vae(args) => cmd::vae::run(args),
        Command::Serve(args) => cmd::serve::run(args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {}", report(&e));
            std::process::ExitCode::from(2)
        }
    }
}

/// The error and its causes joined by `: `, skipping a cause whose text the message already ends
/// with (library errors that show their source, e.g. `path: No such file or directory (os
/// error 2)`, would otherwise print the OS message twice).
fn report(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain().map(|c| c.to_string()) {
        if out.ends_with(&cause) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&cause);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::report;
    use anyhow::Context;

    #[test]
    fn os_messages_are_printed_once() {
        let io = std::fs::read("/nonexistent/ff-report-test").unwrap_err();
        let os = io.to_string();
        let library = ff_model::ModelError::Io { path: "/nonexistent/ff-report-test".into(), source: io };
        let err = Err::<(), _>(library).context("cannot load the DiT").unwrap_err();
        let text = report(&err);
        assert_eq!(text, format!("cannot load the DiT: /nonexistent/ff-report-test: {os}"));
        assert_eq!(text.matches(&os).count(), 1, "{text}");
        // distinct causes are all kept
        let err = anyhow::anyhow!("inner").context("middle").context("outer");
        assert_eq!(report(&err), "outer: middle: inner");
    }
}
