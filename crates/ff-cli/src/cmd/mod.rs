//! One module per subcommand, each with its clap `Args` and a `run`; a command group (`bench`,
//! `train`, `vae`, `world`) is a folder whose `mod.rs` dispatches to its subcommands. No command
//! imports another's internals: what several share lives in the crate's shared modules
//! (`backend`, `progress`, `schedule`, `encode`, `world_dir`) or in the library crates.

/// A command group's clap `Args` (one of its subcommands), the subcommands (each a module with
/// its `Args` and `run`; doc comments and `#[command]` attributes give their help) and the
/// group's `run`, which runs the one given.
macro_rules! command_group {
    ($($(#[$attr:meta])* $variant:ident => $module:ident),+ $(,)?) => {
        #[derive(clap::Args)]
        pub struct Args {
            #[command(subcommand)]
            command: Command,
        }

        #[derive(clap::Subcommand)]
        enum Command {
            $($(#[$attr])* $variant($module::Args),)+
        }

        pub fn run(args: Args) -> anyhow::Result<std::process::ExitCode> {
            match args.command {
                $(Command::$variant(args) => $module::run(args),)+
            }
        }
    };
}

pub mod bench;
pub mod encode_videos;
pub mod eval;
pub mod generate;
pub mod kernels;
pub mod plan;
pub mod serve;
pub mod simulate;
pub mod train;
pub mod vae;
pub mod verify_fixture;
pub mod world;
