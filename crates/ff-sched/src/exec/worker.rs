//! The worker loop of the execution engine (see the module docs of `exec`).

use super::{Placement, Runner};
use crate::bank::{Banks, Entry, WorkerBanks};
use crate::error::{Result, SchedError};
use crate::schedule::{Graph, KvKey, Node, NodeId};
use crate::trace::Span;
use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, SyncSender, channel, sync_channel};
use std::time::{Duration, Instant};

/// What one worker returns.
pub(super) struct Done<X> {
    pub outputs: Vec<(NodeId, X)>,
    pub spans: Vec<Span>,
    /// Peak bytes of the K/V entries the worker kept alive: its banks and what it sent that a
    /// reader had not taken yet.
    pub peak_kv_bytes: usize,
}

pub(super) fn is_peer_stop(e: &SchedError) -> bool {
    matches!(e, SchedError::PeerStopped { .. })
}

/// Who needs what: derived once from the graph and placement, shared by all workers.
struct Routes<'g> {
    graph: &'g Graph,
    /// The worker that runs each node (a sharded node: its lead, which sends what it produces).
    worker: Vec<usize>,
    /// Every worker that runs each node: its shards' workers (context-parallel planner forwards;
    /// each ends with the whole output and K/V), else the one worker.
    group: Vec<std::ops::Range<usize>>,
    consumers: Vec<Vec<NodeId>>,
    readers: HashMap<KvKey, Vec<usize>>,
    publisher: HashMap<KvKey, NodeId>,
    /// `links[p][w]`: K/V entries worker `p` sends worker `w` over the whole graph.
    links: Vec<Vec<usize>>,
    /// Whether a worker only publishes K/V: it sends no latents and waits for nothing from
    /// other workers (the dedicated planner).
    kv_source: Vec<bool>,
}

impl<'g> Routes<'g> {
    fn new(graph: &'g Graph, placement: &Placement) -> Self {
        let n = placement.workers();
        let worker: Vec<usize> = graph.nodes.iter().map(|n| placement.worker_of(n)).collect();
        let group: Vec<_> = graph.nodes.iter().map(|n| placement.workers_of(n)).collect();
        let mut consumers = vec![Vec::new(); graph.nodes.len()];
        let mut readers: HashMap<KvKey, Vec<usize>> = HashMap::new();
        let mut publisher = HashMap::new();
        let mut kv_source = vec![true; n];
        for node in &graph.nodes {
            if let Some(s) = node.source {
                consumers[s].push(node.id);
            }
            for &d in node.deps.iter().filter(|&&d| !group[d].contains(&worker[node.id])) {
                kv_source[worker[node.id]] = false;
                kv_source[worker[d]] &= graph.nodes[node.id].source != Some(d);
            }
            for k in &node.reads {
                readers.entry(*k).or_default().extend(group[node.id].clone());
            }
            for k in &node.publishes {
                publisher.insert(*k, node.id);
            }
        }
        let mut links = vec![vec![0; n]; n];
        for (key, r) in readers.iter_mut() {
            r.sort_unstable();
            r.dedup();
            if let Some(&p) = publisher.get(key) {
                for &w in r.iter().filter(|&&w| !group[p].contains(&w)) {
                    links[worker[p]][w] += 1;
                }
            }
        }
        Self { graph, worker, group, consumers, readers, publisher, links, kv_source }
    }

    /// Capacity of the K/V link `p → w`. A K/V source (the dedicated planner) can only be held up
    /// by full links, so its links hold one planner block plus one window step: readers take
    /// anchors in publication order as their windows advance (by `G − 1` anchors), and the
    /// planner blocks instead of running ahead. Other links hold all their entries, since the
    /// producer's later nodes may be what a reader waits for (the shared prologue publishes every
    /// anchor before it renders).
    fn capacity(&self, p: usize, w: usize) -> usize {
        let c = &self.graph.contract.config;
        match self.kv_source[p] {
            true => self.links[p][w].min(c.planner_block + c.anchor_window),
            false => self.links[p][w],
        }
        .max(1)
    }

    /// Consumers of `node`'s latent on worker `w`.
    fn uses_on(&self, node: NodeId, w: usize) -> usize {
        self.consumers[node].iter().filter(|&&c| self.group[c].contains(&w)).count()
    }

    /// Other workers that take `node`'s latent (from its lead).
    fn latent_targets(&self, node: NodeId) -> Vec<usize> {
        let mut t: Vec<usize> =
            self.consumers[node].iter().flat_map(|&c| self.group[c].clone()).filter(|w| !self.group[node].contains(w)).collect();
        t.sort_unstable();
        t.dedup();
        t
    }
}

/// K/V entries a worker has sent that some reader has not taken yet: still alive on the sender's
/// device. Key → (readers left, bytes).
#[derive(Default)]
struct InFlight(Mutex<HashMap<KvKey, (usize, usize)>>);

impl InFlight {
    fn sent(&self, key: KvKey, readers: usize, bytes: usize) {
        self.0.lock().expect("in-flight lock").insert(key, (readers, bytes));
    }

    fn taken(&self, key: KvKey) {
        let mut map = self.0.lock().expect("in-flight lock");
        if let Some((left, _)) = map.get_mut(&key) {
            *left -= 1;
            if *left == 0 {
                map.remove(&key);
            }
        }
    }

    /// Bytes in flight of entries that `banks` does not also hold (clones share memory).
    fn bytes<T: Entry>(&self, banks: &Banks<T>) -> usize {
        self.0.lock().expect("in-flight lock").iter().filter(|(k, _)| !banks.has(**k)).map(|(_, (_, b))| b).sum()
    }
}

struct Inbox<X, K> {
    latents: Receiver<(NodeId, X)>,
    /// One receiver per sending worker (`None` where nothing is sent).
    kv: Vec<Option<Receiver<(KvKey, K)>>>,
}

struct Outbox<X, K> {
    latents: Vec<Sender<(NodeId, X)>>,
    /// One bounded sender per reading worker (`None` where nothing is sent).
    kv: Vec<Option<SyncSender<(KvKey, K)>>>,
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
    in_flight: &'a [InFlight],
    inbox: Inbox<R::Latent, R::Kv>,
    outbox: Outbox<R::Latent, R::Kv>,
}

impl<R: Runner> Worker<'_, '_, R> {
    fn run(self, mut runner: R) -> Result<Done<R::Latent>> {
        let graph = self.routes.graph;
        let mut banks: Banks<R::Kv> = Banks::new(graph, self.plan);
        let mut latents: HashMap<NodeId, (R::Latent, usize)> = HashMap::new();
        let mut done = Done { outputs: Vec::new(), spans: Vec::new(), peak_kv_bytes: 0 };
        let send_err = |_| SchedError::PeerStopped { worker: self.id };
        for node in graph.nodes.iter().filter(|n| self.routes.group[n.id].contains(&self.id)) {
            let source = match node.source {
                Some(s) => Some(self.take_latent(s, &mut latents, &runner)?),
                None => None,
            };
            for key in &node.reads {
                self.pull(*key, &mut banks, &runner)?;
            }
            let reads = banks.segments(&node.reads)?;
            let t0 = self.start.elapsed().as_secs_f64();
            let (x0, kvs) = runner.run(node, source.as_ref(), &reads)?;
            let t1 = self.start.elapsed().as_secs_f64();
            done.spans.push(Span { node: node.id, worker: self.id, start: t0, end: t1 });
            self.publish(node, kvs, &mut banks)?;
            done.peak_kv_bytes = done.peak_kv_bytes.max(banks.bytes() + self.in_flight[self.id].bytes(&banks));
            let lead = self.routes.worker[node.id] == self.id;
            for w in self.routes.latent_targets(node.id).into_iter().filter(|_| lead) {
                self.outbox.latents[w].send((node.id, x0.clone())).map_err(send_err)?;
            }
            let local = self.routes.uses_on(node.id, self.id);
            if local > 0 {
                latents.insert(node.id, (x0.clone(), local));
            }
            if node.output && lead {
                done.outputs.push((node.id, x0));
            }
        }
        Ok(done)
    }

    /// Takes K/V entries from the publisher of `key` (in publication order) until `key` is here.
    fn pull(&self, key: KvKey, banks: &mut Banks<R::Kv>, runner: &R) -> Result<()> {
        let Some(from) =
            self.routes.publisher.get(&key).filter(|&&p| !self.routes.group[p].contains(&self.id)).map(|&p| self.routes.worker[p])
        else {
            return Ok(());
        };
        let link = self.inbox.kv[from].as_ref().expect("a link from every publisher this worker reads");
        while !banks.has(key) {
            let (k, kv) = recv(link, self.abort, self.id)?;
            self.in_flight[from].taken(k);
            banks.publish(k, runner.adopt_kv(kv))?;
        }
        Ok(())
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
            let lead = self.routes.worker[node.id] == self.id;
            let group = &self.routes.group[node.id];
            let remote: Vec<usize> = readers.iter().copied().filter(|w| lead && !group.contains(w)).collect();
            if !remote.is_empty() {
                self.in_flight[self.id].sent(*key, remote.len(), kv.bytes());
            }
            for w in remote {
                let link = self.outbox.kv[w].as_ref().expect("a link to every reader");
                link.send((*key, kv.clone())).map_err(|_| SchedError::PeerStopped { worker: self.id })?;
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

/// Runs every worker, each inside its pool (worker 0 waits on this thread), and returns their
/// results in worker order.
pub(super) fn run_all<R: Runner>(
    graph: &Graph,
    placement: &Placement,
    plans: &[WorkerBanks],
    runners: Vec<R>,
    pools: &[rayon::ThreadPool],
) -> Vec<Result<Done<R::Latent>>> {
    let routes = Routes::new(graph, placement);
    let n = placement.workers();
    let (lat_tx, lat_rx): (Vec<_>, Vec<_>) = (0..n).map(|_| channel()).unzip();
    // kv_tx[p][w] / kv_rx[w][p]: the K/V link from worker p to worker w
    let mut kv_tx: Vec<Vec<Option<SyncSender<_>>>> = (0..n).map(|_| (0..n).map(|_| None).collect()).collect();
    let mut kv_rx: Vec<Vec<Option<Receiver<_>>>> = (0..n).map(|_| (0..n).map(|_| None).collect()).collect();
    for p in 0..n {
        for w in (0..n).filter(|&w| routes.links[p][w] > 0) {
            let (tx, rx) = sync_channel(routes.capacity(p, w));
            kv_tx[p][w] = Some(tx);
            kv_rx[w][p] = Some(rx);
        }
    }
    let in_flight: Vec<InFlight> = (0..n).map(|_| InFlight::default()).collect();
    let abort = AtomicBool::new(false);
    let start = Instant::now();
    let workers: Vec<Worker<R>> = lat_rx
        .into_iter()
        .zip(kv_rx)
        .zip(kv_tx)
        .enumerate()
        .map(|(id, ((latents, kv_in), kv_out))| Worker {
            id,
            routes: &routes,
            plan: &plans[id],
            start,
            abort: &abort,
            in_flight: &in_flight,
            inbox: Inbox { latents, kv: kv_in },
            outbox: Outbox { latents: lat_tx.clone(), kv: kv_out },
        })
        .collect();
    drop(lat_tx);
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
        let mut jobs = workers.into_iter().zip(runners).zip(pools);
        let ((w0, r0), pool0) = jobs.next().expect("at least one worker");
        let handles: Vec<_> = jobs.map(|((w, r), pool)| scope.spawn(move || pool.install(|| guarded(w, r)))).collect();
        let mut results = vec![pool0.install(|| guarded(w0, r0))];
        results.extend(handles.into_iter().map(|h| h.join().expect("worker panics are caught")));
        results
    })
}

/// Rayon threads of each of `workers` workers when the caller has `total`: `total` shared
/// evenly (the first workers take the remainder), at least one each.
pub fn worker_threads(workers: usize, total: usize) -> Vec<usize> {
    (0..workers).map(|w| (total / workers + usize::from(w < total % workers)).max(1)).collect()
}

/// One rayon pool per worker, sized by [`worker_threads`] from the calling thread's pool. A worker
/// runs inside its pool (`install`): its tensor ops' parallel loops then start and join on the
/// pool's own threads, where a thread outside the pool hands every loop over and sleeps until it
/// ends (at one thread, a training step of the small preset took a third longer that way).
pub fn worker_pools(workers: usize) -> Result<Vec<rayon::ThreadPool>> {
    worker_threads(workers, rayon::current_num_threads())
        .into_iter()
        .enumerate()
        .map(|(w, threads)| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .thread_name(move |i| format!("ff-worker{w}-{i}"))
                .build()
                .map_err(|e| SchedError::Worker { worker: w, reason: format!("cannot start its {threads}-thread pool: {e}") })
        })
        .collect()
}
