//! Graphviz DOT of a [`Graph`]: one box per forward (labelled as in traces: `R(i,k)`, `A(j)`, ...),
//! coloured by kind; solid edges carry input latents, dashed edges K/V reads.

use super::graph::{Graph, NodeKind};
use crate::trace::label;
use std::fmt::Write;

impl Graph {
    /// The graph in Graphviz DOT (render with `dot -Tsvg`).
    pub fn to_dot(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "digraph \"{}\" {{", self.schedule);
        let _ = writeln!(s, "  rankdir=LR;\n  node [shape=box, style=filled, fontname=monospace];");
        for n in &self.nodes {
            let colour = match n.kind {
                NodeKind::PlannerDenoise => "#f4c27a",
                NodeKind::PlannerCache => "#e0913a",
                NodeKind::Render => "#8fbcdf",
                NodeKind::ReEncode => "#c9a0dc",
                NodeKind::Bidirectional => "#a8d5a2",
            };
            let _ = writeln!(s, "  n{} [label=\"{}\", fillcolor=\"{colour}\"];", n.id, label(n));
        }
        for n in &self.nodes {
            for &d in &n.deps {
                let style = if Some(d) == n.source { "solid" } else { "dashed" };
                let _ = writeln!(s, "  n{d} -> n{} [style={style}];", n.id);
            }
        }
        s.push_str("}\n");
        s
    }
}
