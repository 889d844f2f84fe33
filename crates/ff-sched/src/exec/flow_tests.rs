//! What the engine measurably does, with a model-free runner that records it: how many K/V
//! entries are alive at once (channels included), which entries and latents cross workers, and
//! whether workers run at the same time.

use super::*;
use crate::bank::Entry;
use crate::contract::{Contract, ContractConfig};
use crate::schedule::{KvKey, NodeKind, ScheduleKind};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Counts K/V entries alive anywhere (a bank, a channel, a reader's slice): clones share one
/// token, as clones of a tensor share its memory.
#[derive(Default)]
struct Live {
    anchors: AtomicUsize,
    peak_anchors: AtomicUsize,
}

struct Token {
    live: Arc<Live>,
}

impl Drop for Token {
    fn drop(&mut self) {
        self.live.anchors.fetch_sub(1, Ordering::SeqCst);
    }
}

#[derive(Clone)]
struct Kv {
    key: KvKey,
    _token: Option<Arc<Token>>,
}

impl Entry for Kv {
    fn bytes(&self) -> usize {
        100
    }
}

/// Everything the runners of one execution saw.
#[derive(Default)]
struct Log {
    /// (worker, key) of every K/V entry a worker received from another.
    kv_moves: Mutex<Vec<(usize, KvKey)>>,
    /// Latents received from another worker.
    latent_moves: AtomicUsize,
}

struct Recording {
    worker: usize,
    live: Arc<Live>,
    log: Arc<Log>,
    /// Sleep of every forward: planner nodes, other nodes.
    cost: (Duration, Duration),
}

impl Runner for Recording {
    type Latent = u64;
    type Kv = Kv;

    fn run(&mut self, node: &Node, source: Option<&u64>, reads: &[&Kv]) -> Result<(u64, Vec<Kv>)> {
        // the entries read are the ones the graph names, in its order
        assert_eq!(reads.iter().map(|r| r.key).collect::<Vec<_>>(), node.reads, "node {}", node.id);
        std::thread::sleep(if node.kind.is_planner() { self.cost.0 } else { self.cost.1 });
        let kvs = node
            .publishes
            .iter()
            .map(|&key| {
                let token = matches!(key, KvKey::Anchor(_)).then(|| {
                    let now = self.live.anchors.fetch_add(1, Ordering::SeqCst) + 1;
                    self.live.peak_anchors.fetch_max(now, Ordering::SeqCst);
                    Arc::new(Token { live: self.live.clone() })
                });
                Kv { key, _token: token }
            })
            .collect();
        Ok((source.copied().unwrap_or(0) + 1, kvs))
    }

    fn adopt_latent(&self, latent: u64) -> u64 {
        self.log.latent_moves.fetch_add(1, Ordering::SeqCst);
        latent
    }

    fn adopt_kv(&self, kv: Kv) -> Kv {
        self.log.kv_moves.lock().unwrap().push((self.worker, kv.key));
        kv
    }
}

struct Run {
    execution: Execution<u64>,
    live: Arc<Live>,
    log: Arc<Log>,
}

fn run(g: &Graph, p: Placement, cost: (Duration, Duration)) -> Run {
    let (live, log) = (Arc::new(Live::default()), Arc::new(Log::default()));
    let runners = (0..p.workers()).map(|worker| Recording { worker, live: live.clone(), log: log.clone(), cost }).collect::<Vec<_>>();
    let execution = execute(g, &p, runners).unwrap();
    Run { execution, live, log }
}

fn flashforward(latents: usize) -> Graph {
    ScheduleKind::FlashForward.build(&Contract::new(ContractConfig::new(latents)).unwrap()).unwrap()
}

const FAST_PLANNER: (Duration, Duration) = (Duration::ZERO, Duration::from_micros(300));

#[test]
fn streaming_keeps_a_bounded_number_of_anchors_alive_at_any_length() {
    // The planner is free and the renderers are slow, so the planner runs as far ahead as the
    // engine lets it. Alive anchors (banks, channels, in use) must stay within what the contract
    // bounds: the planner's ring (18 context + 3), each renderer's window ring (3 + 2) and one
    // block plus one window step (3 + 3) on each renderer's link; with 1 to 4 stage workers.
    for workers in 1..=4 {
        let bound = 21 + workers * (5 + 6);
        for latents in [141, 1001] {
            let g = flashforward(latents);
            let r = run(&g, Placement::streaming(workers), FAST_PLANNER);
            let peak = r.live.peak_anchors.load(Ordering::SeqCst);
            let total = g.contract.anchors.len();
            assert!(peak <= bound, "L = {latents}, {workers} workers: {peak} anchors alive at once (bound {bound}, {total} in the video)");
            assert_eq!(r.live.anchors.load(Ordering::SeqCst), 0, "every entry is freed at the end");
        }
    }
}

#[test]
fn reported_peaks_count_entries_in_flight_and_do_not_grow_with_length() {
    // 100 bytes an entry. Renderer workers hold their window ring and stage bank, the same at
    // 201 and 1001 latents.
    let renderers = |latents| run(&flashforward(latents), Placement::streaming(4), FAST_PLANNER).execution.peak_bank_bytes[..4].to_vec();
    assert_eq!(renderers(201), renderers(1001));
    // A planner that keeps only the block it publishes (no context): the anchors it has sent and
    // the slowest reader has not taken are alive beyond its bank, counted in its peak, and bounded
    // by the links (a block plus a window step, and the one being sent).
    let g = ScheduleKind::FlashForward.build(&Contract::new(ContractConfig::new(1001).with_planner_context(0)).unwrap()).unwrap();
    let e = run(&g, Placement::streaming(4), FAST_PLANNER).execution;
    assert_eq!(e.banks[4].anchor_slots, 3);
    let planner = e.peak_bank_bytes[4];
    assert!(planner > 3 * 100, "entries in flight are not counted: {planner}");
    assert!(planner <= (3 + 3 + 3 + 1) * 100, "entries in flight are not bounded: {planner}");
}

#[test]
fn only_anchors_and_latents_cross_workers_once_each() {
    // Counted as the runners receive them: with one worker per stage, each stage bank stays on
    // its worker, every anchor reaches every stage worker exactly once, and each chunk's latent
    // moves S − 1 times (stage k → k+1).
    let g = flashforward(81);
    let (c, s) = (&g.contract, g.contract.stages());
    for (p, anchor_readers) in [(Placement::wavefront(4), 3), (Placement::streaming(4), 4)] {
        let r = run(&g, p, (Duration::ZERO, Duration::ZERO));
        let moves = r.log.kv_moves.lock().unwrap().clone();
        assert!(moves.iter().all(|(_, k)| matches!(k, KvKey::Anchor(_))), "{p:?}: a stage bank entry moved");
        let mut sorted = moves.clone();
        sorted.sort_by_key(|(w, k)| (*w, format!("{k:?}")));
        sorted.dedup();
        assert_eq!(sorted.len(), moves.len(), "{p:?}: an entry was sent twice to one worker");
        assert_eq!(moves.len(), c.anchors.len() * anchor_readers, "{p:?}");
        assert_eq!(r.log.latent_moves.load(Ordering::SeqCst), c.num_chunks() * (s - 1), "{p:?}");
    }
}

/// Whether a span of one set intersects a span of the other in time.
fn overlap(a: &[&crate::trace::Span], b: &[&crate::trace::Span]) -> bool {
    a.iter().any(|x| b.iter().any(|y| x.start < y.end && y.start < x.end))
}

#[test]
fn wavefront_and_streaming_workers_run_at_the_same_time() {
    let g = flashforward(81);
    let cost = (Duration::from_millis(2), Duration::from_millis(2));
    for p in [Placement::wavefront(4), Placement::streaming(4)] {
        let e = run(&g, p, cost).execution;
        let on = |w: usize| e.trace.spans.iter().filter(|s| s.worker == w).collect::<Vec<_>>();
        for w in 1..4 {
            assert!(overlap(&on(w - 1), &on(w)), "{p:?}: stage workers {} and {w} never overlap", w - 1);
        }
        if p == Placement::streaming(4) {
            let render: Vec<_> = e.trace.spans.iter().filter(|s| g.nodes[s.node].kind == NodeKind::Render).collect();
            let plan: Vec<_> = e.trace.spans.iter().filter(|s| g.nodes[s.node].kind.is_planner()).collect();
            assert!(overlap(&plan, &render), "the streaming planner never overlaps rendering");
            // rendering starts right after the first anchor block, long before planning ends
            let first_render = render.iter().map(|s| s.start).fold(f64::INFINITY, f64::min);
            let last_plan = plan.iter().map(|s| s.end).fold(0.0, f64::max);
            assert!(first_render < last_plan);
        }
    }
}
