//! The progress bar of a training run: steps done of the run's total, the last loss, steps/s
//! since this process started, and the ETA (drawn on stderr; hidden when it is not a terminal).

use indicatif::{ProgressBar, ProgressStyle};
use std::time::{Duration, Instant};

const TEMPLATE: &str = "{spinner} [{elapsed_precise}] {bar:32} {pos}/{len} steps | {msg} | ETA {eta}";

pub struct StepProgress {
    bar: ProgressBar,
    started: Instant,
    /// Steps done when this process started (a resumed run's checkpoint).
    first: usize,
}

impl StepProgress {
    /// A bar over `total` steps of which `done` are already done.
    pub fn new(done: usize, total: usize) -> Self {
        let bar = ProgressBar::new(total as u64);
        bar.set_style(ProgressStyle::with_template(TEMPLATE).expect("valid progress template"));
        bar.set_position(done as u64);
        bar.reset_eta();
        Self { bar, started: Instant::now(), first: done }
    }

    /// Records that step `step` finished with `loss`.
    pub fn step(&self, step: usize, loss: f64) {
        self.bar.set_message(message(loss, step - self.first, self.started.elapsed()));
        self.bar.set_position(step as u64);
    }

    /// Prints a line above the bar (e.g. a checkpoint written).
    pub fn note(&self, line: impl AsRef<str>) {
        self.bar.println(line.as_ref());
    }

    pub fn finish(&self) {
        self.bar.finish();
    }

    pub fn abandon(&self, reason: &'static str) {
        self.bar.abandon_with_message(reason);
    }
}

fn message(loss: f64, steps: usize, elapsed: Duration) -> String {
    let seconds = elapsed.as_secs_f64();
    let rate = if seconds > 0.0 { steps as f64 / seconds } else { 0.0 };
    format!("loss {loss:.4} | {rate:.3} steps/s")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_counts_this_processes_steps() {
        assert_eq!(message(0.12345, 3, Duration::from_secs(2)), "loss 0.1235 | 1.500 steps/s");
        assert_eq!(message(1.0, 0, Duration::ZERO), "loss 1.0000 | 0.000 steps/s");
    }
}
