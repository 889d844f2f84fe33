//! One module per subcommand, each with its clap `Args` and a `run`.

pub mod bench;
pub mod bench_attention;
pub mod bench_dit;
pub mod bench_dmd;
pub mod bench_train;
pub mod bench_vae;
pub mod encode_videos;
pub mod eval;
pub mod generate;
pub mod plan;
pub mod simulate;
pub mod train;
pub mod vae;
pub mod verify_fixture;
pub mod world;
