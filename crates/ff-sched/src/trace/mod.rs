//! Timelines of forwards (replayed or measured): Chrome trace JSON (open in Perfetto) and an SVG
//! wavefront chart (workers × time).

mod svg;

use crate::error::{Result, SchedError};
use crate::schedule::{Graph, Node, NodeKind, Unit};
use std::io::Write;
use std::path::{Path, PathBuf};

/// One forward on one worker, in seconds from the start of the run.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Span {
    /// The node's id in its graph.
    pub node: usize,
    /// The worker that ran it.
    pub worker: usize,
    /// Start, seconds.
    pub start: f64,
    /// End, seconds.
    pub end: f64,
}

/// The spans of one run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Trace {
    /// Number of workers (span `worker` is below it).
    pub workers: usize,
    /// One span per forward run.
    pub spans: Vec<Span>,
    /// Name of each worker ("stage 0", "planner", ...).
    pub names: Vec<String>,
}

impl Trace {
    /// End of the last forward.
    pub fn makespan(&self) -> f64 {
        self.spans.iter().map(|s| s.end).fold(0.0, f64::max)
    }

    /// Time to first chunk: end of the output forward holding the first latent position.
    pub fn ttff(&self, graph: &Graph) -> f64 {
        let first = graph.outputs().first().map(|n| n.id);
        self.spans.iter().find(|s| Some(s.node) == first).map_or(0.0, |s| s.end)
    }

    /// Busy seconds per worker: the length of the union of its spans (the nodes of one batched
    /// forward share one interval, which counts once).
    pub fn busy(&self) -> Vec<f64> {
        let mut spans: Vec<&Span> = self.spans.iter().collect();
        spans.sort_by(|a, b| a.start.total_cmp(&b.start));
        let mut busy = vec![0.0; self.workers];
        let mut covered = vec![f64::NEG_INFINITY; self.workers];
        for s in spans {
            let from = s.start.max(covered[s.worker]);
            if s.end > from {
                busy[s.worker] += s.end - from;
                covered[s.worker] = s.end;
            }
        }
        busy
    }

    /// Chrome trace-event JSON (`ph: "X"` complete events, one thread per worker, µs).
    pub fn chrome_json(&self, graph: &Graph) -> serde_json::Value {
        let names = self
            .names
            .iter()
            .enumerate()
            .map(|(tid, name)| serde_json::json!({ "name": "thread_name", "ph": "M", "pid": 0, "tid": tid, "args": { "name": name } }));
        let events: Vec<serde_json::Value> = self
            .spans
            .iter()
            .map(|s| {
                let n = &graph.nodes[s.node];
                serde_json::json!({
                    "name": label(n), "cat": kind_name(n.kind), "ph": "X", "pid": 0, "tid": s.worker,
                    "ts": s.start * 1e6, "dur": (s.end - s.start) * 1e6,
                    "args": { "node": n.id, "level": n.level, "positions": n.positions, "reads": n.reads.len() },
                })
            })
            .chain(names)
            .collect();
        serde_json::json!({ "traceEvents": events, "displayTimeUnit": "ms" })
    }

    /// Writes `path` (Chrome trace JSON) and `path` with extension `svg` (wavefront chart titled
    /// with the schedule and `executor`), creating the folder they go in.
    pub fn write(&self, graph: &Graph, executor: &str, path: &Path) -> Result<PathBuf> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| SchedError::Io { path: dir.to_path_buf(), source })?;
        }
        let json = serde_json::to_vec_pretty(&self.chrome_json(graph)).expect("trace JSON serialises");
        ff_model::io::write_atomic(path, |w| w.write_all(&json))?;
        let svg_path = path.with_extension("svg");
        ff_model::io::write_atomic(&svg_path, |w| w.write_all(svg::render(self, graph, executor).as_bytes()))?;
        Ok(svg_path)
    }
}

/// Short node label: `P(j,k)` planner denoise, `A(j)` anchor cache, `R(i,k)` render,
/// `E(i,l)` re-encode at level l, `B(k)` bidirectional.
pub fn label(n: &Node) -> String {
    let unit = match n.unit {
        Unit::Block(j) | Unit::Chunk(j) => j,
        Unit::Clip => 0,
    };
    match n.kind {
        NodeKind::PlannerDenoise => format!("P({unit},{})", n.level),
        NodeKind::PlannerCache => format!("A({unit})"),
        NodeKind::Render => format!("R({unit},{})", n.level),
        NodeKind::ReEncode => format!("E({unit},{})", n.level),
        NodeKind::Bidirectional => format!("B({})", n.level),
    }
}

fn kind_name(kind: NodeKind) -> &'static str {
    match kind {
        NodeKind::PlannerDenoise => "planner-denoise",
        NodeKind::PlannerCache => "planner-cache",
        NodeKind::Render => "render",
        NodeKind::ReEncode => "re-encode",
        NodeKind::Bidirectional => "bidirectional",
    }
}

#[cfg(test)]
mod tests;
