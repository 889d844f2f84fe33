//! SVG wavefront chart: a title (schedule, executor, makespan), one row per worker (names
//! right-aligned left of the plot), one box per forward coloured by kind and shaded by stage
//! (dark = first stage), a time axis with ticks at 1-2-5 steps, and a legend of the kinds that
//! occur. A box is labelled only when its label fits inside it.

use super::{Trace, kind_name, label};
use crate::schedule::{Graph, NodeKind};
use std::fmt::Write;

const ROW: f64 = 28.0;
const LEFT: f64 = 90.0;
const WIDTH: f64 = 1200.0;
const TOP: f64 = 24.0;
const FONT: f64 = 9.0;
/// Advance of one monospace character at [`FONT`] px (0.6 em).
const CHAR: f64 = 0.6 * FONT;

/// Estimated width in px of `text` in the chart's font.
pub(super) fn text_width(text: &str) -> f64 {
    text.chars().count() as f64 * CHAR
}

pub(super) fn render(trace: &Trace, graph: &Graph, executor: &str) -> String {
    let span = trace.makespan().max(f64::MIN_POSITIVE);
    let scale = WIDTH / span;
    let plot_bottom = TOP + ROW * trace.workers as f64;
    let height = plot_bottom + 60.0;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{height}" font-family="monospace" font-size="{FONT}">"#,
        LEFT + WIDTH + 20.0
    );
    let _ = writeln!(s, r#"<text x="4" y="14" font-size="11">{} on the {executor} executor — {:.4} s</text>"#, graph.schedule, span);
    for (w, name) in trace.names.iter().enumerate() {
        let y = TOP + ROW * w as f64 + ROW / 2.0 + FONT / 3.0;
        let _ = writeln!(s, r#"<text x="{}" y="{y:.1}" text-anchor="end">{name}</text>"#, LEFT - 6.0);
    }
    for sp in &trace.spans {
        let node = &graph.nodes[sp.node];
        let (x, y) = (LEFT + sp.start * scale, TOP + ROW * sp.worker as f64 + 2.0);
        let w = ((sp.end - sp.start) * scale).max(0.5);
        let name = label(node);
        let _ = writeln!(
            s,
            r#"<rect x="{x:.2}" y="{y}" width="{w:.2}" height="{}" fill="{}" stroke="white" stroke-width="0.5"><title>{name} {:.6}–{:.6} s</title></rect>"#,
            ROW - 4.0,
            color(node.kind, node.level, graph.contract.stages()),
            sp.start,
            sp.end
        );
        if text_width(&name) + 4.0 <= w {
            let _ = writeln!(s, r#"<text class="label" x="{:.2}" y="{}" fill="white">{name}</text>"#, x + 2.0, y + 15.0);
        }
    }
    axis(&mut s, span, scale, plot_bottom);
    legend(&mut s, graph, plot_bottom + 40.0);
    s.push_str("</svg>\n");
    s
}

/// A step of 1, 2 or 5 × 10^k giving 4 to 10 ticks over `span`.
pub(super) fn tick_step(span: f64) -> f64 {
    let raw = span / 8.0;
    let magnitude = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0].into_iter().map(|m| m * magnitude).find(|step| span / step <= 10.0).unwrap_or(10.0 * magnitude)
}

fn axis(s: &mut String, span: f64, scale: f64, y: f64) {
    let _ = writeln!(s, r#"<line x1="{LEFT}" y1="{y}" x2="{}" y2="{y}" stroke="black"/>"#, LEFT + WIDTH);
    let step = tick_step(span);
    let decimals = (-step.log10().floor()).max(0.0) as usize;
    let mut i = 0;
    while i as f64 * step <= span * (1.0 + 1e-9) {
        let t = i as f64 * step;
        let x = LEFT + t * scale;
        let _ = writeln!(
            s,
            r#"<g class="tick"><line x1="{x:.2}" y1="{y}" x2="{x:.2}" y2="{}" stroke="black"/><text x="{x:.2}" y="{}" text-anchor="middle">{t:.decimals$}</text></g>"#,
            y + 4.0,
            y + 14.0
        );
        i += 1;
    }
    let _ = writeln!(s, r#"<text x="{}" y="{}" text-anchor="end">time (s)</text>"#, LEFT + WIDTH, y + 26.0);
}

fn legend(s: &mut String, graph: &Graph, y: f64) {
    let kinds = [NodeKind::PlannerDenoise, NodeKind::PlannerCache, NodeKind::Render, NodeKind::ReEncode, NodeKind::Bidirectional];
    let mut x = LEFT;
    for kind in kinds.into_iter().filter(|k| graph.nodes.iter().any(|n| n.kind == *k)) {
        let _ = writeln!(
            s,
            r#"<g class="legend"><rect x="{x:.1}" y="{}" width="10" height="10" fill="{}"/><text x="{:.1}" y="{y}">{}</text></g>"#,
            y - 9.0,
            color(kind, 0, 1),
            x + 14.0,
            kind_name(kind)
        );
        x += 14.0 + text_width(kind_name(kind)) + 16.0;
    }
    let _ = writeln!(s, r#"<text x="{x:.1}" y="{y}">(shade: stage, dark = first)</text>"#);
}

fn color(kind: NodeKind, level: usize, stages: usize) -> String {
    let shade = 35 + 40 * level.min(stages) / stages.max(1);
    match kind {
        NodeKind::PlannerDenoise => format!("hsl(30,80%,{shade}%)"),
        NodeKind::PlannerCache => format!("hsl(280,45%,{shade}%)"),
        NodeKind::Render => format!("hsl(210,70%,{shade}%)"),
        NodeKind::ReEncode => format!("hsl(0,70%,{shade}%)"),
        NodeKind::Bidirectional => format!("hsl(120,50%,{shade}%)"),
    }
}
