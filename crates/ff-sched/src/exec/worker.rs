//! The worker loop of the execution engine (see the module docs of `exec`).

use super::Runner;
use crate::bank::{Banks, WorkerBanks};
use crate::error::{Result, SchedError};
use crate::schedule::{Graph, KvKey, Node, NodeId};
use crate::sim::Placement;
use crate::trace::Span;
use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::time::{Duration, Instant};

/// What one worker returns.
pub(super) struct Done<X> {
    pub outputs: Vec<(NodeId, X)>,
    pub spans: Vec<Span>,
    pub peak_bank_bytes: usize,
}

pub(super) fn is_peer_stop(e: &SchedError) -> bool {
    matches!(e, SchedError::PeerStopped { .. })
}

/// Who needs what: derived once from the graph and placement, shared by all workers.
struct Routes<'g> {
    graph: &'g Graph,
    worker: Vec<usize>,
    consumers: Vec<Vec<NodeId>>,
    readers: HashMap<KvKey, Vec<usize>>,
    publisher: HashMap<KvKey, NodeId>,
}

impl<'g> Routes<'g> {
    fn new(graph: &'g Graph, placement: &Placement) -> Self {
        let worker: Vec<usize> = graph.nodes.iter().map(|n| placement.worker_of(n)).collect();
        let mut consumers = vec![Vec::new(); graph.nodes.len()];
        let mut readers: HashMap<KvKey, Vec<usize>> = HashMap::new();
        let mut publisher = HashMap::new();
        for n in &graph.nodes {
            if let Some(s) = n.source {
                consumers[s].push(n.id);
            }
            for k in &n.reads {
                readers.entry(*k).or_default().push(worker[n.id]);
            }
            for k in &n.publishes {
                publisher.insert(*k, n.id);
            }
        }
        for r in readers.values_mut() {
            r.sort_unstable();
            r.dedup();
        }
        Self { graph, worker, consumers, readers, publisher }
    }

    /// Consumers of `node`'s latent on worker `w`.
    fn uses_on(&self, node: NodeId, w: usize) -> usize {
        self.consumers[node].iter().filter(|&&c| self.worker[c] == w).count()
    }

    /// Other workers that take `node`'s latent.
    fn latent_targets(&self, node: NodeId) -> Vec<usize> {
        let mut t: Vec<usize> = self.consumers[node].iter().map(|&c| self.worker[c]).filter(|&w| w != self.worker[node]).collect();
        t.sort_unstable();
        t.dedup();
        t
    }
}

struct Inbox<X, K> {
    latents: Receiver<(NodeId, X)>,
    kv: Receiver<(KvKey, K)>,
}

struct Outbox<X, K> {
    latents: Vec<Sender<(NodeId, X)>>,
    kv: Vec<Sender<(KvKey, K)>>,
}

/// Waits for a message, giving up when a peer has failed.
fn recv<T>(rx: &Receiver<T>, abort: &AtomicBool, worker: usize) -> Result<T> {
    loop {
        match rx.recv_timeout(Duration::from_millis(20)) {
            Ok(m) => return Ok(m),
            Err(RecvTimeoutError::Timeout) if !abort.load(Ordering::Relaxed) => {}
            Err(_) => return Err(SchedError::PeerStopped { worker }),
        }
    }
}

struct Worker<'a, 'g, R: Runner> {
    id: usize,
    routes: &'a Routes<'g>,
    plan: &'a WorkerBanks,
    start: Instant,
    abort: &'a AtomicBool,
    inbox: Inbox<R::Latent, R::Kv>,
    outbox: Outbox<R::Latent, R::Kv>,
}

impl<R: Runner> Worker<'_, '_, R> {
    fn run(self, mut runner: R) -> Result<Done<R::Latent>> {
        let graph = self.routes.graph;
        let mut banks: Banks<R::Kv> = Banks::new(graph, self.plan);
        let mut latents: HashMap<NodeId, (R::Latent, usize)> = HashMap::new();
        let mut done = Done { outputs: Vec::new(), spans: Vec::new(), peak_bank_bytes: 0 };
        let send_err = |_| SchedError::PeerStopped { worker: self.id };
        for node in graph.nodes.iter().filter(|n| self.routes.worker[n.id] == self.id) {
            let source = match node.source {
                Some(s) => Some(self.take_latent(s, &mut latents, &runner)?),
                None => None,
            };
            for key in &node.reads {
                let remote = self.routes.publisher.get(key).is_some_and(|&p| self.routes.worker[p] != self.id);
                while remote && !banks.has(*key) {
                    let (k, kv) = recv(&self.inbox.kv, self.abort, self.id)?;
                    banks.publish(k, runner.adopt_kv(kv))?;
                }
            }
            let reads = banks.segments(&node.reads)?;
            let t0 = self.start.elapsed().as_secs_f64();
            let (x0, kvs) = runner.run(node, source.as_ref(), &reads)?;
            let t1 = self.start.elapsed().as_secs_f64();
            done.spans.push(Span { node: node.id, worker: self.id, start: t0, end: t1 });
            self.publish(node, kvs, &mut banks)?;
            done.peak_bank_bytes = done.peak_bank_bytes.max(banks.bytes());
            for w in self.routes.latent_targets(node.id) {
                self.outbox.latents[w].send((node.id, x0.clone())).map_err(send_err)?;
            }
            let local = self.routes.uses_on(node.id, self.id);
            if local > 0 {
                latents.insert(node.id, (x0.clone(), local));
            }
            if node.output {
                done.outputs.push((node.id, x0));
            }
        }
        Ok(done)
    }

    fn publish(&self, node: &Node, kvs: Vec<R::Kv>, banks: &mut Banks<R::Kv>) -> Result<()> {
        if kvs.len() != node.publishes.len() {
            return Err(SchedError::Worker {
                worker: self.id,
                reason: format!("node {} returned {} K/V entries for {} published keys", node.id, kvs.len(), node.publishes.len()),
            });
        }
        for (key, kv) in node.publishes.iter().zip(kvs) {
            let readers = self.routes.readers.get(key).map_or(&[][..], Vec::as_slice);
            for &w in readers.iter().filter(|&&w| w != self.id) {
                self.outbox.kv[w].send((*key, kv.clone())).map_err(|_| SchedError::PeerStopped { worker: self.id })?;
            }
            if readers.contains(&self.id) {
                banks.publish(*key, kv)?;
            }
        }
        Ok(())
    }

    /// The x0 of `source`, local or received; dropped after its last local use.
    fn take_latent(&self, source: NodeId, latents: &mut HashMap<NodeId, (R::Latent, usize)>, runner: &R) -> Result<R::Latent> {
        while !latents.contains_key(&source) {
            let (id, x) = recv(&self.inbox.latents, self.abort, self.id)?;
            latents.insert(id, (runner.adopt_latent(x), self.routes.uses_on(id, self.id)));
        }
        let (x, uses) = latents.get_mut(&source).expect("present");
        *uses -= 1;
        let x = x.clone();
        if *uses == 0 {
            latents.remove(&source);
        }
        Ok(x)
    }
}

/// Runs every worker (worker 0 on this thread) and returns their results in worker order.
pub(super) fn run_all<R: Runner>(
    graph: &Graph,
    placement: &Placement,
    plans: &[WorkerBanks],
    runners: Vec<R>,
) -> Vec<Result<Done<R::Latent>>> {
    let routes = Routes::new(graph, placement);
    let n = placement.workers();
    let (lat_tx, lat_rx): (Vec<_>, Vec<_>) = (0..n).map(|_| channel()).unzip();
    let (kv_tx, kv_rx): (Vec<_>, Vec<_>) = (0..n).map(|_| channel()).unzip();
    let abort = AtomicBool::new(false);
    let start = Instant::now();
    let workers: Vec<Worker<R>> = lat_rx
        .into_iter()
        .zip(kv_rx)
        .enumerate()
        .map(|(id, (latents, kv))| Worker {
            id,
            routes: &routes,
            plan: &plans[id],
            start,
            abort: &abort,
            inbox: Inbox { latents, kv },
            outbox: Outbox { latents: lat_tx.clone(), kv: kv_tx.clone() },
        })
        .collect();
    drop((lat_tx, kv_tx));
    let guarded = |w: Worker<R>, r: R| {
        let id = w.id;
        let result = catch_unwind(AssertUnwindSafe(|| w.run(r)))
            .unwrap_or_else(|_| Err(SchedError::Worker { worker: id, reason: "panicked".into() }));
        if result.is_err() {
            abort.store(true, Ordering::Relaxed);
        }
        result
    };
    std::thread::scope(|scope| {
        let mut pairs = workers.into_iter().zip(runners);
        let (w0, r0) = pairs.next().expect("at least one worker");
        let handles: Vec<_> = pairs.map(|(w, r)| scope.spawn(move || guarded(w, r))).collect();
        let mut results = vec![guarded(w0, r0)];
        results.extend(handles.into_iter().map(|h| h.join().expect("worker panics are caught")));
        results
    })
}
