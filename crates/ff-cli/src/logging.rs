//! What the libraries log (`tracing` spans and events: model loading, prompt encoding,
//! generation, each forward, decoding, training steps), shown on stderr: `RUST_LOG` when it is
//! set (e.g. `RUST_LOG=flashforward=debug`), else the level of `-v` (info), `-vv` (debug) or
//! `-vvv` (trace); without either, warnings only. A span is printed when it closes, with its
//! time.

use std::io::IsTerminal;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::format::FmtSpan;

/// Installs the stderr subscriber for `verbose` (the count of `-v`).
pub fn init(verbose: u8) {
    let rust_log = std::env::var("RUST_LOG").ok().filter(|v| !v.trim().is_empty());
    let filter = match rust_log.as_deref().map(EnvFilter::try_new) {
        Some(Ok(filter)) => filter,
        Some(Err(e)) => {
            eprintln!("warning: RUST_LOG is not a valid filter ({e}); using the level of -v");
            EnvFilter::new(level(verbose))
        }
        None => EnvFilter::new(level(verbose)),
    };
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_span_events(FmtSpan::CLOSE)
        .init();
}

/// The level of `-v` repeated `verbose` times.
fn level(verbose: u8) -> &'static str {
    match verbose {
        0 => "warn",
        1 => "info",
        2 => "debug",
        _ => "trace",
    }
}

#[cfg(test)]
mod tests {
    use super::level;

    #[test]
    fn each_v_is_one_level_more() {
        assert_eq!([0, 1, 2, 3, 9].map(level), ["warn", "info", "debug", "trace", "trace"]);
    }
}
