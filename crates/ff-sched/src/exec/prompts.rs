//! [`Prompts`]: which prompt every node of a generation is made under, when the prompt switches
//! (ARCHITECTURE §13).
//!
//! A generation has prompts `0..n` (0: the request's), each an embedding `[1, text_tokens,
//! text_dim]`, and **segments**: from latent position `p` on, prompt `i`. Segment starts are
//! chunk boundaries, so a renderer chunk lies in one segment and takes its prompt at every stage
//! (and its re-encode forward too). A planner block takes the prompt in effect at its first anchor
//! when its first node starts, and keeps it for all its nodes (Euler steps and clean-endpoint
//! forward), so one block is never planned under two prompts. Cross-attention reads the prompt's
//! text K/V; what happens to the self-attention K/V already published (anchors, stage-matched
//! history) is said below.
//!
//! Switches known before the run are segments from the start. A **live** switch comes from a
//! [`LiveSource`] polled whenever a node starts (on the worker about to run it): its prompt is
//! applied at the first chunk boundary that no worker has started a renderer forward of, i.e. one
//! past the last position of the furthest renderer chunk started so far, on any worker and at
//! any stage. The node being started already sees it. Planner blocks already started keep their
//! prompt; those not started yet whose first anchor is at or past the boundary are planned under
//! the new prompt. Clones share one state, so all workers agree on every switch.
//!
//! **Across a switch** ([`Carry`], per state: the anchors, the stage-matched history), for the
//! switches known before the run, K/V that a node under another prompt reads is
//! * kept: read as it was made;
//! * re-cached (LongLive's KV re-cache): its publishing node also runs its forward under the
//!   reader's prompt, from the same input and reads, and publishes every version as one entry,
//!   one batch element per prompt ([`Prompts::versions`], its own first); each reader takes the
//!   version of its own prompt, or the first when there is none (a live switch);
//! * dropped: the reader does not read it, as the first chunk of a video reads no history and
//!   the first planner block no earlier anchor (the video restarts at the switch).

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use burn::tensor::Tensor;
use burn::tensor::backend::Backend;

use crate::error::{Result, SchedError};
use crate::schedule::{Graph, KvKey, Node, Unit};

/// Where live switches come from: polled when a node starts.
pub trait LiveSource<B: Backend>: Send + Sync {
    /// The prompt switched to since the last call, if any: its text (for reports) and its
    /// embedding `[1, text_tokens, text_dim]` (any device), or why it cannot be read, which fails
    /// the node that polled it.
    fn take(&self) -> Option<std::result::Result<(String, Tensor<B, 3>), String>>;
}

/// What a reader after a switch does with K/V made under the prompt before it (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Carry {
    /// Read it as it was made.
    #[default]
    Keep,
    /// Read it re-made under the reader's prompt.
    Recache,
    /// Do not read it.
    Drop,
}

/// What happens across a switch to each kind of published K/V.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Across {
    /// The planner's clean anchor K/V.
    pub anchors: Carry,
    /// The renderer's stage-matched history K/V (and the baselines' chunk K/V).
    pub history: Carry,
}

impl Across {
    fn of(&self, key: &KvKey) -> Carry {
        match key {
            KvKey::Anchor(_) => self.anchors,
            KvKey::Chunk { .. } => self.history,
        }
    }
}

/// One applied prompt segment: from latent position `start` on, prompt `prompt`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    /// First latent position under the prompt.
    pub start: usize,
    /// Index of the prompt ([`Prompts::name`]).
    pub prompt: usize,
}

struct State<B: Backend> {
    texts: Vec<(String, Tensor<B, 3>)>,
    /// Sorted by start; the first starts at 0.
    segments: Vec<Segment>,
    /// The prompt each planner block started under.
    blocks: Vec<Option<usize>>,
    /// One past the last position of every renderer chunk started so far.
    started: usize,
}

impl<B: Backend> State<B> {
    fn at(&self, position: usize) -> usize {
        self.segments.iter().rev().find(|s| s.start <= position).map_or(0, |s| s.prompt)
    }

    fn switch(&mut self, start: usize, name: String, text: Tensor<B, 3>) {
        let prompt = match self.texts.iter().position(|(n, _)| *n == name) {
            Some(known) => known,
            None => {
                self.texts.push((name, text));
                self.texts.len() - 1
            }
        };
        self.segments.retain(|s| s.start != start);
        let at = self.segments.partition_point(|s| s.start < start);
        self.segments.insert(at, Segment { start, prompt });
    }
}

/// The prompts and segments of one generation, shared by its workers (see the module docs).
#[derive(Clone)]
pub struct Prompts<B: Backend> {
    state: Arc<Mutex<State<B>>>,
    live: Option<Arc<dyn LiveSource<B>>>,
    /// Published keys made under several prompts: the prompt of each batch element.
    versions: Arc<HashMap<KvKey, Vec<usize>>>,
    /// Published keys that readers under another prompt drop: the publisher's prompt.
    dropped: Arc<HashMap<KvKey, usize>>,
}

impl<B: Backend> Prompts<B> {
    /// One prompt for the whole video.
    pub fn single(name: impl Into<String>, text: Tensor<B, 3>) -> Self {
        let state =
            State { texts: vec![(name.into(), text)], segments: vec![Segment { start: 0, prompt: 0 }], blocks: Vec::new(), started: 0 };
        Self { state: Arc::new(Mutex::new(state)), live: None, versions: Arc::default(), dropped: Arc::default() }
    }

    /// These prompts switching to `name` (embedding `text`) from latent position `start` on (a
    /// chunk boundary). A prompt equal to one already held reuses its index, so switching to the
    /// same prompt changes nothing.
    pub fn switch(self, start: usize, name: impl Into<String>, text: Tensor<B, 3>) -> Self {
        self.lock().switch(start, name.into(), text);
        self
    }

    /// These prompts also taking live switches from `source`.
    pub fn live(self, source: Arc<dyn LiveSource<B>>) -> Self {
        Self { live: Some(source), ..self }
    }

    /// These prompts carrying K/V across the switches made so far as `across` says (see the
    /// module docs), for the nodes of `graph`.
    pub fn across(self, graph: &Graph, across: Across) -> Self {
        let prompt = {
            let state = self.lock();
            graph.nodes.iter().map(|n| state.at(n.positions.first().copied().unwrap_or(0))).collect::<Vec<usize>>()
        };
        let publisher: HashMap<KvKey, usize> = graph.nodes.iter().flat_map(|n| n.publishes.iter().map(move |k| (*k, n.id))).collect();
        let mut extra: HashMap<usize, BTreeSet<usize>> = HashMap::new();
        let mut dropped = HashMap::new();
        for n in &graph.nodes {
            for (k, &p) in n.reads.iter().filter_map(|k| Some((k, publisher.get(k)?))) {
                match across.of(k) {
                    _ if prompt[p] == prompt[n.id] => {}
                    Carry::Keep => {}
                    Carry::Recache => {
                        extra.entry(p).or_default().insert(prompt[n.id]);
                    }
                    Carry::Drop => {
                        dropped.insert(*k, prompt[p]);
                    }
                }
            }
        }
        let mut versions = HashMap::new();
        for (p, others) in extra {
            let list: Vec<usize> = std::iter::once(prompt[p]).chain(others).collect();
            versions.extend(graph.nodes[p].publishes.iter().map(|k| (*k, list.clone())));
        }
        Self { versions: Arc::new(versions), dropped: Arc::new(dropped), ..self }
    }

    /// Whether a reader under prompt `prompt` drops `key` (see the module docs).
    pub fn drops(&self, key: &KvKey, prompt: usize) -> bool {
        self.dropped.get(key).is_some_and(|p| *p != prompt)
    }

    /// The prompts of the versions of published key `key`, its publisher's first (`None`: one
    /// version).
    pub fn versions(&self, key: &KvKey) -> Option<&[usize]> {
        self.versions.get(key).map(Vec::as_slice)
    }

    /// Which version of `key` a reader under prompt `prompt` takes (batch element).
    pub fn version_for(&self, key: &KvKey, prompt: usize) -> usize {
        self.versions(key).and_then(|v| v.iter().position(|p| *p == prompt)).unwrap_or(0)
    }

    fn lock(&self) -> MutexGuard<'_, State<B>> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Called when `node` starts: applies a pending live switch, then returns the index of the
    /// prompt `node` is made under (see the module docs).
    pub fn begin(&self, node: &Node) -> Result<usize> {
        let mut state = self.lock();
        if let Some(taken) = self.live.as_ref().and_then(|l| l.take()) {
            let (name, text) = taken.map_err(|reason| SchedError::Config(format!("the live prompt switch failed: {reason}")))?;
            let start = state.started;
            tracing::info!(prompt = %name, position = start, "live prompt switch");
            state.switch(start, name, text);
        }
        let first = node.positions.first().copied().unwrap_or(0);
        Ok(match node.unit {
            Unit::Block(j) => {
                if state.blocks.len() <= j {
                    state.blocks.resize(j + 1, None);
                }
                let at = state.at(first);
                *state.blocks[j].get_or_insert(at)
            }
            Unit::Chunk(_) | Unit::Clip => {
                let end = node.positions.last().map_or(0, |p| p + 1);
                state.started = state.started.max(end);
                state.at(first)
            }
        })
    }

    /// The embedding `[1, text_tokens, text_dim]` of prompt `index`.
    pub fn text(&self, index: usize) -> Result<Tensor<B, 3>> {
        let state = self.lock();
        let (_, text) = state.texts.get(index).ok_or_else(|| SchedError::Config(format!("no prompt {index}")))?;
        Ok(text.clone())
    }

    /// The text of prompt `index` (as the caller named it).
    pub fn name(&self, index: usize) -> Option<String> {
        self.lock().texts.get(index).map(|(n, _)| n.clone())
    }

    /// The index of the prompt latent position `position` is rendered under, as it stands now.
    pub fn at(&self, position: usize) -> usize {
        self.lock().at(position)
    }

    /// The segments as they stand now (after the run: every switch applied).
    pub fn segments(&self) -> Vec<Segment> {
        self.lock().segments.clone()
    }
}
