//! Terminal progress for `flashforward generate` (chunks done, latents/s, ETA) and the Ctrl-C
//! flag that lets a run stop at a chunk boundary.

use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow};
use indicatif::{ProgressBar, ProgressStyle};

const TEMPLATE: &str = "{spinner} [{elapsed_precise}] {bar:32} {pos}/{len} chunks | {msg} | ETA {eta}";

/// A progress bar over the chunks of one video, drawn on stderr (hidden when stderr is not a
/// terminal).
pub struct ChunkProgress {
    bar: ProgressBar,
    started: Instant,
    latents: usize,
}

impl ChunkProgress {
    pub fn new(total_chunks: usize) -> Self {
        Self::with_bar(ProgressBar::new(total_chunks as u64))
    }

    fn with_bar(bar: ProgressBar) -> Self {
        bar.set_style(ProgressStyle::with_template(TEMPLATE).expect("valid progress template"));
        bar.set_message(rate_message(0, Duration::ZERO));
        Self { bar, started: Instant::now(), latents: 0 }
    }

    /// Records one finished chunk of `latents` latent frames.
    pub fn chunk_done(&mut self, latents: usize) {
        self.latents += latents;
        self.bar.set_message(rate_message(self.latents, self.started.elapsed()));
        self.bar.inc(1);
    }

    /// Latent frames finished so far.
    #[cfg(test)]
    pub fn latents_done(&self) -> usize {
        self.latents
    }

    /// Ends the bar after the last chunk.
    pub fn finish(&self) {
        self.bar.finish();
    }

    /// Leaves the bar where it stopped, with `reason` (e.g. "interrupted").
    pub fn abandon(&self, reason: impl Into<Cow<'static, str>>) {
        self.bar.abandon_with_message(reason);
    }
}

fn rate_message(latents: usize, elapsed: Duration) -> String {
    let seconds = elapsed.as_secs_f64();
    let rate = if seconds > 0.0 { latents as f64 / seconds } else { 0.0 };
    format!("{rate:.2} latents/s")
}

/// The process's Ctrl-C flag, installing the handler on first call (later calls return the same
/// flag). The first Ctrl-C sets the flag so the run stops at the next chunk boundary; a second one
/// exits at once with status 130 (video outputs on disk still hold every finished chunk).
pub fn install_interrupt_flag() -> Result<Arc<AtomicBool>> {
    static FLAG: Mutex<Option<Arc<AtomicBool>>> = Mutex::new(None);
    let mut slot = FLAG.lock().map_err(|_| anyhow!("interrupt flag lock poisoned"))?;
    if let Some(flag) = slot.as_ref() {
        return Ok(Arc::clone(flag));
    }
    let flag = Arc::new(AtomicBool::new(false));
    let handler_flag = Arc::clone(&flag);
    ctrlc::set_handler(move || {
        if handler_flag.swap(true, Ordering::SeqCst) {
            std::process::exit(130);
        }
        eprintln!("\ninterrupted: stopping after the current chunk (Ctrl-C again to quit now)");
    })
    .context("cannot install the Ctrl-C handler")?;
    *slot = Some(Arc::clone(&flag));
    Ok(flag)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_is_latents_over_elapsed_time() {
        assert_eq!(rate_message(6, Duration::from_secs(2)), "3.00 latents/s");
        assert_eq!(rate_message(3, Duration::from_millis(400)), "7.50 latents/s");
        assert_eq!(rate_message(0, Duration::ZERO), "0.00 latents/s");
    }

    #[test]
    fn chunks_advance_the_bar_and_count_latents() {
        let mut progress = ChunkProgress::with_bar(ProgressBar::hidden());
        progress.bar.set_length(7);
        progress.chunk_done(3);
        progress.chunk_done(3);
        assert_eq!(progress.bar.position(), 2);
        assert_eq!(progress.latents_done(), 6);
        assert!(progress.bar.message().ends_with("latents/s"));
        progress.finish();
        assert!(progress.bar.is_finished());
    }

    #[test]
    fn ctrl_c_sets_the_flag_once_installed() {
        let flag = install_interrupt_flag().unwrap();
        assert!(Arc::ptr_eq(&flag, &install_interrupt_flag().unwrap()), "one handler per process");
        assert!(!flag.load(Ordering::SeqCst));
        let status = std::process::Command::new("kill").args(["-INT", &std::process::id().to_string()]).status().unwrap();
        assert!(status.success());
        // The handler runs on ctrlc's thread; wait for it (bounded, not a timing assertion).
        let deadline = Instant::now() + Duration::from_secs(30);
        while !flag.load(Ordering::SeqCst) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(flag.load(Ordering::SeqCst));
    }
}
