//! The run's metrics: `RUN/metrics.jsonl`, one JSON object per optimizer step (`step`, `loss`,
//! `lr`, `grad_norm`, `clips`, `seconds`, and the objective's loss parts), and `RUN/loss.svg`,
//! the loss curve redrawn (atomically) at every checkpoint.
//!
//! The log is appended line by line. On resume it is cut back to the steps the checkpoint holds
//! (later lines, and a line a kill left half-written, belong to steps that will run again).

use crate::engine::StepReport;
use crate::{Result, TrainError};
use ff_model::io::write_atomic;
use serde_json::{Value, json};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The metrics log in the run directory.
pub const METRICS_FILE: &str = "metrics.jsonl";
/// The loss curve in the run directory.
pub const LOSS_CURVE_FILE: &str = "loss.svg";

/// The open metrics log of a run.
pub struct Metrics {
    path: PathBuf,
    file: File,
    /// (step, loss) of every logged step.
    losses: Vec<(usize, f64)>,
}

impl Metrics {
    /// Opens `run/metrics.jsonl`, keeping only the records of steps `1..=step` (0 for a new run).
    pub fn open(run: &Path, step: usize) -> Result<Self> {
        let path = run.join(METRICS_FILE);
        let kept: Vec<Value> = match std::fs::read_to_string(&path) {
            Ok(text) => text
                .lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .filter(|v| v["step"].as_u64().is_some_and(|s| (s as usize) <= step))
                .collect(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(source) => return Err(TrainError::Io { path, source }),
        };
        let text: String = kept.iter().map(|v| format!("{v}\n")).collect();
        write_atomic(&path, |w| w.write_all(text.as_bytes()))?;
        let file = OpenOptions::new().append(true).open(&path).map_err(|source| TrainError::Io { path: path.clone(), source })?;
        let losses = kept.iter().filter_map(|v| Some((v["step"].as_u64()? as usize, v["loss"].as_f64()?))).collect();
        Ok(Self { path, file, losses })
    }

    /// Appends one step's record.
    pub fn log(&mut self, report: &StepReport, seconds: f64) -> Result<()> {
        let mut record = json!({
            "step": report.step, "loss": report.loss, "lr": report.lr, "grad_norm": report.grad_norm,
            "clips": report.clips, "seconds": seconds,
        });
        for (name, value) in &report.parts {
            record[*name] = json!(value);
        }
        writeln!(self.file, "{record}").map_err(|source| self.io(source))?;
        self.losses.push((report.step, report.loss));
        Ok(())
    }

    fn io(&self, source: std::io::Error) -> TrainError {
        TrainError::Io { path: self.path.clone(), source }
    }

    /// Flushes the log to disk and redraws the loss curve beside it.
    pub fn checkpoint(&mut self) -> Result<()> {
        self.file.sync_data().map_err(|source| self.io(source))?;
        let svg = loss_svg(&self.losses);
        Ok(write_atomic(&self.path.with_file_name(LOSS_CURVE_FILE), |w| w.write_all(svg.as_bytes()))?)
    }
}

/// An SVG line plot of loss against step (log-scale loss axis when every loss is positive).
pub fn loss_svg(points: &[(usize, f64)]) -> String {
    let (w, h, m) = (640.0, 360.0, 56.0);
    let points: Vec<(f64, f64)> = points.iter().filter(|(_, l)| l.is_finite()).map(|&(s, l)| (s as f64, l)).collect();
    let log = !points.is_empty() && points.iter().all(|&(_, l)| l > 0.0);
    let y_of = |l: f64| if log { l.log10() } else { l };
    let range = |xs: &mut dyn Iterator<Item = f64>| xs.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| (lo.min(x), hi.max(x)));
    let (x0, x1) = range(&mut points.iter().map(|p| p.0));
    let (y0, y1) = range(&mut points.iter().map(|p| y_of(p.1)));
    let sx = |x: f64| m + (x - x0) / (x1 - x0).max(1e-12) * (w - 2.0 * m);
    let sy = |y: f64| h - m - (y - y0) / (y1 - y0).max(1e-12) * (h - 2.0 * m);
    let line: Vec<String> = points.iter().map(|&(x, l)| format!("{:.1},{:.1}", sx(x), sy(y_of(l)))).collect();
    let label = |y: f64| if log { format!("{:.4}", 10f64.powf(y)) } else { format!("{y:.4}") };
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"12\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"{}\" y=\"20\" text-anchor=\"middle\">training loss{}</text>\n\
         <path d=\"M{m},{m} V{} H{}\" fill=\"none\" stroke=\"black\"/>\n",
        w / 2.0,
        if log { " (log scale)" } else { "" },
        h - m,
        w - m
    );
    if !points.is_empty() {
        svg += &format!("<polyline points=\"{}\" fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"1.5\"/>\n", line.join(" "));
        svg += &format!("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n", m - 4.0, m + 4.0, label(y1));
        svg += &format!("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n", m - 4.0, h - m + 4.0, label(y0));
        svg += &format!("<text x=\"{m}\" y=\"{}\" text-anchor=\"middle\">{x0}</text>\n", h - m + 18.0);
        svg += &format!("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">step {x1}</text>\n", w - m, h - m + 18.0);
    }
    svg + "</svg>\n"
}
