//! Batched diagonal executor: one worker runs the graph wave by wave, each wave's independent
//! nodes as one forward ([`Runner::run_batch`]). Waves are the graph's dependency layers (a node's
//! layer is one more than its deepest dependency's), split by model (planner / renderer) and by
//! frame count (a shorter last chunk is batched apart); for
//! FlashForward they are the planner chain and then the wavefront's anti-diagonals (`R_FF` waves;
//! HiAR: `R_HiAR`). A wave runs as one forward whose batch elements each attend through their own
//! node's K/V window (contexts of different lengths need no padding), so the result is
//! bit-identical to the serial executor. Nodes of one wave never read what another publishes; all
//! reads of a wave happen before its publishes.

use super::{Execution, Runner};
use crate::bank::{Banks, bank_plan};
use crate::error::{Result, SchedError};
use crate::exec::Placement;
use crate::schedule::{Graph, Node, NodeId};
use crate::trace::{Span, Trace};
use std::time::Instant;

/// The waves of `graph`, in execution order.
pub fn waves(graph: &Graph) -> Vec<Vec<NodeId>> {
    let mut layer = vec![0usize; graph.nodes.len()];
    for n in &graph.nodes {
        layer[n.id] = n.deps.iter().map(|&d| layer[d] + 1).max().unwrap_or(0);
    }
    let key = |n: &Node| (layer[n.id], !n.kind.is_planner(), n.positions.len());
    let mut keys: Vec<(usize, bool, usize)> = graph.nodes.iter().map(key).collect();
    keys.sort_unstable();
    keys.dedup();
    keys.iter().map(|&k| graph.nodes.iter().filter(|n| key(n) == k).map(|n| n.id).collect()).collect()
}

/// Runs `graph` wave by wave on one worker.
pub fn execute_batched<R: Runner>(graph: &Graph, mut runner: R) -> Result<Execution<R::Latent>> {
    let plan = bank_plan(graph, &Placement::serial()).remove(0);
    let mut banks: Banks<R::Kv> = Banks::new(graph, &plan);
    let mut uses = vec![0usize; graph.nodes.len()];
    for s in graph.nodes.iter().filter_map(|n| n.source) {
        uses[s] += 1;
    }
    let mut latents: Vec<Option<R::Latent>> = vec![None; graph.nodes.len()];
    let (mut outputs, mut spans, mut peak, mut forwards) = (Vec::new(), Vec::new(), 0, 0);
    let start = Instant::now();
    for wave in waves(graph) {
        let nodes: Vec<&Node> = wave.iter().map(|&id| &graph.nodes[id]).collect();
        let t0 = start.elapsed().as_secs_f64();
        let results = {
            let sources = nodes
                .iter()
                .map(|n| match n.source {
                    None => Ok(None),
                    Some(s) => latents[s].as_ref().map(Some).ok_or_else(|| lost(n, s)),
                })
                .collect::<Result<Vec<_>>>()?;
            let reads = nodes.iter().map(|n| banks.segments(&n.reads)).collect::<Result<Vec<_>>>()?;
            runner.run_batch(&nodes, &sources, &reads)?
        };
        let t1 = start.elapsed().as_secs_f64();
        forwards += 1;
        for (node, (x0, kvs)) in nodes.iter().zip(results) {
            if kvs.len() != node.publishes.len() {
                return Err(SchedError::Worker { worker: 0, reason: format!("node {} returned {} K/V entries", node.id, kvs.len()) });
            }
            for (key, kv) in node.publishes.iter().zip(kvs) {
                banks.publish(*key, kv)?;
            }
            spans.push(Span { node: node.id, worker: 0, start: t0, end: t1 });
            if let Some(s) = node.source {
                uses[s] -= 1;
                if uses[s] == 0 {
                    latents[s] = None;
                }
            }
            if node.output {
                outputs.push((node.id, x0.clone()));
            }
            if uses[node.id] > 0 {
                latents[node.id] = Some(x0);
            }
        }
        peak = peak.max(banks.bytes());
    }
    outputs.sort_by_key(|(id, _)| graph.nodes[*id].positions.first().copied());
    Ok(Execution {
        outputs: outputs.into_iter().map(|(_, x)| x).collect(),
        trace: Trace { workers: 1, spans, names: vec!["batched".into()] },
        forwards,
        peak_bank_bytes: vec![peak],
        banks: vec![plan],
    })
}

fn lost(node: &Node, source: NodeId) -> SchedError {
    SchedError::Worker { worker: 0, reason: format!("node {}: input latent of node {source} is gone", node.id) }
}
