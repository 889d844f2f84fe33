//! Getting finished chunks out of a running executor, in video order.
//!
//! [`Streamed`] wraps a worker's [`Runner`]: it sends the x0 of every output node (a finished
//! renderer chunk, or the whole clip) to the decoding thread as soon as the forward returns, and
//! stops the worker at the next forward once a stop is requested (the request's stop flag, the
//! caller's `Break`, or a failed decode).
//! With `splice` it also sends each planner block's clean anchor latents (`--splice`, see
//! [`super::splice`]).
//! It also tells the request's [`ForwardHook`] when each forward starts and ends.
//! [`InOrder`] hands the chunks on in position order, whatever order the workers finish them in.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::time::Instant;

use ff_sched::SchedError;
use ff_sched::exec::{NodeResult, Runner};
use ff_sched::schedule::{Node, NodeKind};

use crate::request::{Forward, ForwardHook};

/// A finished output: its latent positions and its x0.
pub struct Finished<X> {
    pub positions: Vec<usize>,
    pub latent: X,
    /// The planner's clean anchors of `positions` (sent with `splice`), not video output.
    pub planner: bool,
}

/// Why workers should stop early.
#[derive(Clone, Default)]
pub struct Stop {
    /// The request's stop flag (e.g. Ctrl-C, or a client that went away).
    pub interrupt: Arc<AtomicBool>,
    /// Set when the consumer of the outputs said `Break` or failed.
    pub abort: Arc<AtomicBool>,
}

impl Stop {
    /// Whether a stop was requested.
    pub fn stopped(&self) -> bool {
        self.reason().is_some()
    }

    /// Why the workers stop, if they do.
    pub fn reason(&self) -> Option<String> {
        if self.interrupt.load(Ordering::SeqCst) {
            Some("stopped by the request's stop flag".into())
        } else if self.abort.load(Ordering::SeqCst) {
            Some("stopped by the caller".into())
        } else {
            None
        }
    }
}

/// A runner that streams its output nodes' latents (see the module docs).
pub struct Streamed<R: Runner> {
    inner: R,
    worker: usize,
    outputs: Sender<Finished<R::Latent>>,
    stop: Stop,
    splice: bool,
    hook: Option<ForwardHook>,
}

impl<R: Runner> Streamed<R> {
    pub fn new(inner: R, worker: usize, outputs: Sender<Finished<R::Latent>>, stop: Stop) -> Self {
        Self { inner, worker, outputs, stop, splice: false, hook: None }
    }

    /// Tells `hook` when each forward starts and ends.
    pub fn with_hook(self, hook: Option<ForwardHook>) -> Self {
        Self { hook, ..self }
    }

    /// Also streams the clean anchors of every planner block (the source of its clean-endpoint
    /// forward).
    pub fn with_splice(self, splice: bool) -> Self {
        Self { splice, ..self }
    }
}

impl<R: Runner> Streamed<R> {
    fn check_stop(&self) -> ff_sched::Result<()> {
        match self.stop.reason() {
            Some(reason) => Err(SchedError::Worker { worker: self.worker, reason }),
            None => Ok(()),
        }
    }

    fn tell(&self, nodes: &[&Node], done: bool) {
        if let Some(hook) = &self.hook {
            let at = Instant::now();
            nodes.iter().for_each(|node| (hook.0)(Forward { worker: self.worker, node, at, done }));
        }
    }

    /// Sends `latent` on when `node` is an output, and with `splice` the clean anchors `source`
    /// of a planner clean-endpoint node. A closed channel means the consumer gave up; the abort
    /// flag then stops the next forward.
    fn send(&self, node: &Node, source: Option<&R::Latent>, latent: &R::Latent) {
        let (latent, planner) = match (node.output, self.splice, node.kind, source) {
            (true, ..) => (latent, false),
            // under a context-parallel planner every shard ends with the anchors: shard 0 sends
            (false, true, NodeKind::PlannerCache, Some(anchors)) if self.inner.planner_shard().is_none_or(|(s, _)| s == 0) => {
                (anchors, true)
            }
            _ => return,
        };
        let _ = self.outputs.send(Finished { positions: node.positions.clone(), latent: latent.clone(), planner });
    }
}

impl<R: Runner> Runner for Streamed<R> {
    type Latent = R::Latent;
    type Kv = R::Kv;

    fn run(&mut self, node: &Node, source: Option<&R::Latent>, reads: &[&R::Kv]) -> ff_sched::Result<NodeResult<R>> {
        self.check_stop()?;
        self.tell(&[node], false);
        let result = self.inner.run(node, source, reads)?;
        self.tell(&[node], true);
        self.send(node, source, &result.0);
        Ok(result)
    }

    fn run_batch(
        &mut self,
        nodes: &[&Node],
        sources: &[Option<&R::Latent>],
        reads: &[Vec<&R::Kv>],
    ) -> ff_sched::Result<Vec<NodeResult<R>>> {
        self.check_stop()?;
        self.tell(nodes, false);
        let results = self.inner.run_batch(nodes, sources, reads)?;
        self.tell(nodes, true);
        for ((node, source), (latent, _)) in nodes.iter().zip(sources).zip(&results) {
            self.send(node, *source, latent);
        }
        Ok(results)
    }

    fn planner_shard(&self) -> Option<(usize, usize)> {
        self.inner.planner_shard()
    }

    fn adopt_latent(&self, latent: R::Latent) -> R::Latent {
        self.inner.adopt_latent(latent)
    }

    fn adopt_kv(&self, kv: R::Kv) -> R::Kv {
        self.inner.adopt_kv(kv)
    }
}

/// Reorders finished outputs into position order.
pub struct InOrder<X> {
    next: usize,
    waiting: BTreeMap<usize, Finished<X>>,
}

impl<X> Default for InOrder<X> {
    fn default() -> Self {
        Self { next: 0, waiting: BTreeMap::new() }
    }
}

impl<X> InOrder<X> {
    /// Takes one finished output and returns those that can now go out, in order.
    pub fn push(&mut self, done: Finished<X>) -> Vec<Finished<X>> {
        self.waiting.insert(done.positions.first().copied().unwrap_or(usize::MAX), done);
        let mut ready = Vec::new();
        while let Some(done) = self.waiting.remove(&self.next) {
            self.next += done.positions.len();
            ready.push(done);
        }
        ready
    }

    /// Latent positions handed on so far.
    pub fn done(&self) -> usize {
        self.next
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A runner whose output is its node's id.
    struct Id;
    impl Runner for Id {
        type Latent = usize;
        type Kv = Kv;
        fn run(&mut self, node: &Node, _: Option<&usize>, _: &[&Kv]) -> ff_sched::Result<(usize, Vec<Kv>)> {
            Ok((node.id, vec![]))
        }
    }

    #[derive(Debug, Clone)]
    struct Kv;
    impl ff_sched::bank::Entry for Kv {
        fn bytes(&self) -> usize {
            0
        }
    }

    fn finished(start: usize, len: usize) -> Finished<usize> {
        Finished { positions: (start..start + len).collect(), latent: start, planner: false }
    }

    #[test]
    fn outputs_go_out_in_position_order() {
        let mut order = InOrder::default();
        assert!(order.push(finished(3, 3)).is_empty(), "chunk 1 waits for chunk 0");
        assert!(order.push(finished(6, 1)).is_empty());
        let out: Vec<usize> = order.push(finished(0, 3)).into_iter().map(|f| f.latent).collect();
        assert_eq!(out, [0, 3, 6]);
        assert_eq!(order.done(), 7);
        let out: Vec<usize> = order.push(finished(7, 3)).into_iter().map(|f| f.latent).collect();
        assert_eq!(out, [7]);
    }

    #[test]
    fn a_stop_request_ends_the_worker_at_the_next_forward() {
        struct Count(usize);
        impl Runner for Count {
            type Latent = usize;
            type Kv = Kv;
            fn run(&mut self, node: &Node, _: Option<&usize>, _: &[&Kv]) -> ff_sched::Result<(usize, Vec<Kv>)> {
                self.0 += 1;
                Ok((node.id, vec![]))
            }
        }
        let contract = ff_sched::Contract::new(ff_sched::ContractConfig::new(4).with_stages(1)).unwrap();
        let graph = ff_sched::ScheduleKind::NcCausalRcm.build(&contract).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let stop = Stop::default();
        let mut runner = Streamed::new(Count(0), 2, tx, stop.clone());
        let out = graph.nodes.iter().find(|n| n.output).unwrap();
        runner.run(out, None, &[]).unwrap();
        assert_eq!(rx.try_recv().unwrap().positions, out.positions, "output nodes are streamed");
        let batch: Vec<&Node> = graph.nodes.iter().filter(|n| n.output).take(2).collect();
        assert_eq!(runner.run_batch(&batch, &[None, None], &[vec![], vec![]]).unwrap().len(), 2);
        let streamed: Vec<Vec<usize>> = rx.try_iter().map(|f| f.positions).collect();
        assert_eq!(streamed, [batch[0].positions.clone(), batch[1].positions.clone()], "batched outputs too");
        stop.interrupt.store(true, Ordering::SeqCst);
        let err = runner.run(out, None, &[]).unwrap_err().to_string();
        assert!(err.contains("worker 2") && err.contains("stop flag"), "{err}");
        assert!(runner.run_batch(&batch, &[None, None], &[vec![], vec![]]).is_err());
        assert_eq!(runner.inner.0, 3, "no forward after the stop");
    }

    #[test]
    fn the_hook_hears_each_forward_start_and_end_in_turn() {
        let contract = ff_sched::Contract::new(ff_sched::ContractConfig::new(4).with_stages(1)).unwrap();
        let graph = ff_sched::ScheduleKind::NcCausalRcm.build(&contract).unwrap();
        let heard = Arc::new(std::sync::Mutex::new(Vec::new()));
        let log = heard.clone();
        let hook = ForwardHook(Arc::new(move |f: Forward| log.lock().unwrap().push((f.worker, f.node.id, f.done, f.at))));
        let (tx, _rx) = std::sync::mpsc::channel();
        let mut runner = Streamed::new(Id, 1, tx, Stop::default()).with_hook(Some(hook));
        let [a, b] = [&graph.nodes[0], &graph.nodes[1]];
        runner.run(a, None, &[]).unwrap();
        runner.run_batch(&[a, b], &[None, None], &[vec![], vec![]]).unwrap();
        let heard = heard.lock().unwrap();
        let events: Vec<(usize, usize, bool)> = heard.iter().map(|&(w, n, d, _)| (w, n, d)).collect();
        let (ia, ib) = (a.id, b.id);
        assert_eq!(events, [(1, ia, false), (1, ia, true), (1, ia, false), (1, ib, false), (1, ia, true), (1, ib, true)]);
        assert!(heard.windows(2).all(|w| w[0].3 <= w[1].3), "times never go back");
    }

    #[test]
    fn with_splice_the_planner_blocks_clean_anchors_are_streamed_too() {
        let contract = ff_sched::Contract::new(ff_sched::ContractConfig::new(21)).unwrap();
        let graph = ff_sched::ScheduleKind::FlashForward.build(&contract).unwrap();
        let cache = graph.nodes.iter().find(|n| n.kind == NodeKind::PlannerCache).unwrap();
        let denoise = graph.nodes.iter().find(|n| n.kind == NodeKind::PlannerDenoise).unwrap();
        for splice in [false, true] {
            let (tx, rx) = std::sync::mpsc::channel();
            let mut runner = Streamed::new(Id, 0, tx, Stop::default()).with_splice(splice);
            runner.run(denoise, None, &[]).unwrap();
            runner.run(cache, Some(&42), &[]).unwrap();
            let sent: Vec<(Vec<usize>, usize, bool)> = rx.try_iter().map(|f| (f.positions, f.latent, f.planner)).collect();
            let want = if splice { vec![(cache.positions.clone(), 42, true)] } else { vec![] };
            assert_eq!(sent, want, "splice {splice}: the clean-endpoint forward's source, the block's anchors");
        }
    }
}
