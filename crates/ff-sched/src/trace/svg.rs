//! SVG wavefront chart: one row per worker, one box per forward, coloured by kind.

use super::{Trace, label};
use crate::schedule::{Graph, NodeKind};
use std::fmt::Write;

const ROW: f64 = 28.0;
const LEFT: f64 = 70.0;
const WIDTH: f64 = 1200.0;

pub(super) fn render(trace: &Trace, graph: &Graph) -> String {
    let span = trace.makespan().max(f64::MIN_POSITIVE);
    let scale = WIDTH / span;
    let height = ROW * (trace.workers as f64 + 1.0) + 10.0;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{height}" font-family="monospace" font-size="9">"#,
        LEFT + WIDTH + 10.0
    );
    let _ = writeln!(s, r#"<text x="4" y="12">{} — {:.4} s</text>"#, graph.schedule, span);
    for (w, name) in trace.names.iter().enumerate() {
        let _ = writeln!(s, r#"<text x="4" y="{}">{name}</text>"#, ROW * (w as f64 + 1.0) + 16.0);
    }
    for sp in &trace.spans {
        let node = &graph.nodes[sp.node];
        let (x, y) = (LEFT + sp.start * scale, ROW * (sp.worker as f64 + 1.0) + 2.0);
        let w = ((sp.end - sp.start) * scale).max(0.5);
        let _ = writeln!(
            s,
            r#"<rect x="{x:.2}" y="{y}" width="{w:.2}" height="{}" fill="{}" stroke="white" stroke-width="0.5"><title>{} {:.6}–{:.6} s</title></rect>"#,
            ROW - 4.0,
            color(node.kind, node.level, graph.contract.stages()),
            label(node),
            sp.start,
            sp.end
        );
        if w > 34.0 {
            let _ = writeln!(s, r#"<text x="{:.2}" y="{}" fill="white">{}</text>"#, x + 2.0, y + 15.0, label(node));
        }
    }
    s.push_str("</svg>\n");
    s
}

fn color(kind: NodeKind, level: usize, stages: usize) -> String {
    let shade = 35 + 40 * level.min(stages) / stages.max(1);
    match kind {
        NodeKind::PlannerDenoise | NodeKind::PlannerCache => format!("hsl(30,80%,{shade}%)"),
        NodeKind::Render => format!("hsl(210,70%,{shade}%)"),
        NodeKind::ReEncode => format!("hsl(0,70%,{shade}%)"),
        NodeKind::Bidirectional => format!("hsl(120,50%,{shade}%)"),
    }
}
