//! What a training run shows while it runs, drawn from the runner's events
//! (`ff_train::runner::Progress`): a progress bar of the steps done of the run's total, the last
//! loss, steps/s since this process started and the ETA (on stderr; hidden when it is not a
//! terminal), a line per checkpoint above it, and the resume and interrupt notes.

use ff_train::runner::Progress;
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

/// Draws the runner's events: the bar from `Started` on, printed notes for the rest.
#[derive(Default)]
pub struct Observer {
    bar: Option<StepProgress>,
}

impl Observer {
    pub fn on(&mut self, event: Progress) {
        match (event, &self.bar) {
            (Progress::Resumed { dir, step }, _) => eprintln!("resumed from {} after step {step}", dir.display()),
            (Progress::Started { done, total }, _) => self.bar = Some(StepProgress::new(done, total)),
            (Progress::Step { report, .. }, Some(bar)) => bar.step(report.step, report.loss),
            (Progress::Checkpoint { step, loss, dir }, Some(bar)) => {
                bar.note(format!("step {step}: loss {loss:.4}, checkpoint {}", dir.display()))
            }
            (Progress::Stopped { step }, bar) => {
                if let Some(bar) = bar {
                    bar.abandon("interrupted");
                }
                eprintln!("interrupted after step {step}: resume with --resume");
            }
            (Progress::Finished { .. }, Some(bar)) => bar.finish(),
            _ => {}
        }
    }

    /// Leaves the bar where a failed run stopped.
    pub fn failed(&self) {
        if let Some(bar) = &self.bar {
            bar.abandon("failed");
        }
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
