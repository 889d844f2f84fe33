//! One module per subcommand, each with its clap `Args` and a `run`.

pub mod bench_dit;
pub mod generate;
pub mod verify_fixture;
