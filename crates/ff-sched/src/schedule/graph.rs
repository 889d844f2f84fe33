//! The generation graph: nodes are model forwards, edges are data dependencies.
//!
//! A node runs one forward over `positions` (absolute latent positions; anchors for the planner)
//! at noise `level` (`0..S` are stages, `S` is the clean endpoint, t = 0). Its input latent is
//! pure noise (`source = None`, level 0) or the x0 estimate of its `source` node re-noised to the
//! node's level with fresh noise (no noise at level `S`). It reads the K/V entries `reads` (in
//! this order: anchors, then history oldest first) and publishes `publishes`. `deps` are the
//! source plus the publishers of everything it reads; every dep has a smaller id, so id order is
//! a topological order, and the order in which one worker runs its nodes.
//!
//! Planner nodes count levels on the planner's own table ([`Contract::planner_timestep`]); under
//! the Euler planner sampler a denoising node's output is its input advanced one Euler step (the
//! next level's latent, the clean latent after the last step) rather than an x0 estimate, and the
//! next node takes it as is. A guided step is one node of two forwards ([`Node::passes`]).

use crate::contract::Contract;
use crate::error::{Result, SchedError};
use std::collections::HashMap;

/// Index of a node in [`Graph::nodes`].
pub type NodeId = usize;

/// What a forward does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NodeKind {
    /// Planner denoising forward over one anchor block.
    PlannerDenoise,
    /// Planner clean-endpoint forward publishing a block's anchor K/V (cache-update-only).
    PlannerCache,
    /// Renderer (or baseline AR) forward advancing one chunk by one stage.
    Render,
    /// Re-encode forward that only publishes K/V of a chunk (cache-update-only).
    ReEncode,
    /// Whole-clip forward of the bidirectional baseline.
    Bidirectional,
}

impl NodeKind {
    /// Forwards that advance no output and exist only to publish K/V.
    pub fn is_cache_update(self) -> bool {
        matches!(self, Self::PlannerCache | Self::ReEncode)
    }
    /// The planner's forwards ([`NodeKind::PlannerDenoise`], [`NodeKind::PlannerCache`]).
    pub fn is_planner(self) -> bool {
        matches!(self, Self::PlannerDenoise | Self::PlannerCache)
    }
}

/// What unit of the video a node works on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Unit {
    /// Planner block `j` (anchor indices `contract.blocks[j]`).
    Block(usize),
    /// Renderer chunk `i` (positions `contract.chunks[i]`).
    Chunk(usize),
    /// The whole clip.
    Clip,
}

/// A published K/V entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum KvKey {
    /// Clean K/V of one anchor frame (anchor index).
    Anchor(usize),
    /// K/V of a chunk in history bank `bank` (FlashForward: bank k is stage k).
    Chunk {
        /// History bank id (below [`Graph::history_banks`]).
        bank: usize,
        /// Renderer chunk index.
        chunk: usize,
    },
}

/// One model forward.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Node {
    /// Index in [`Graph::nodes`].
    pub id: NodeId,
    /// What the forward does.
    pub kind: NodeKind,
    /// The block, chunk or clip it works on.
    pub unit: Unit,
    /// Stage worker this node belongs to (a renderer stage; planner nodes: their stage).
    pub stage: usize,
    /// Noise level of the input (`S` = clean endpoint).
    pub level: usize,
    /// Absolute latent positions of its frames (anchor positions for the planner).
    pub positions: Vec<usize>,
    /// Timestep of every frame (1000 scale).
    pub timesteps: Vec<f64>,
    /// Node whose x0 estimate is this node's input (None: pure noise).
    pub source: Option<NodeId>,
    /// K/V entries it reads: anchors, then history oldest first.
    pub reads: Vec<KvKey>,
    /// K/V entries it publishes.
    pub publishes: Vec<KvKey>,
    /// The source and the publishers of its reads, ascending (every one a smaller id).
    pub deps: Vec<NodeId>,
    /// Whether the node's x0 estimate is final video output for its unit.
    pub output: bool,
    /// Model forwards the node runs: 2 for a guided planner step (conditional and empty
    /// prompt, one batched call), else 1.
    pub passes: usize,
}

/// A schedule's generation graph over a contract.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Graph {
    /// Name of the schedule (a [`super::ScheduleKind`] name, or a custom one).
    pub schedule: String,
    /// The contract the graph was built over.
    pub contract: Contract,
    /// The forwards in id order (a topological order).
    pub nodes: Vec<Node>,
    /// Number of chunk history banks (`KvKey::Chunk::bank` is below it).
    pub history_banks: usize,
    /// Capacity (chunks) of each history bank: the longest tail any node reads.
    pub history_capacity: usize,
}

/// Node description handed to [`GraphBuilder::push`]; ids, timesteps and deps are filled in.
#[derive(Debug, Clone)]
pub struct NodeSpec {
    /// [`Node::kind`].
    pub kind: NodeKind,
    /// [`Node::unit`].
    pub unit: Unit,
    /// [`Node::stage`].
    pub stage: usize,
    /// [`Node::level`]; the timestep follows from it (the planner's table for planner kinds).
    pub level: usize,
    /// [`Node::positions`].
    pub positions: Vec<usize>,
    /// [`Node::source`].
    pub source: Option<NodeId>,
    /// [`Node::reads`]: each must be published by an earlier node.
    pub reads: Vec<KvKey>,
    /// [`Node::publishes`]: each key at most once per graph.
    pub publishes: Vec<KvKey>,
    /// [`Node::output`].
    pub output: bool,
}

/// Builds a [`Graph`]: assigns ids and derives dependency edges from sources and published keys.
/// [`GraphBuilder::planner`] and [`GraphBuilder::rollout`] add the planner and the chunk × stage
/// rollout of a [`Rule`](super::Rule); [`GraphBuilder::push`] adds any other forward.
///
/// A custom contract: anchor windows of 2 anchors and a stage-matched history of 3 chunks.
///
/// ```
/// use ff_sched::schedule::{GraphBuilder, HistorySource, KvKey, NodeKind, Rule, Unit};
/// use ff_sched::{Contract, ContractConfig};
///
/// let c = Contract::new(ContractConfig::new(41).with_anchor_window(2).with_history(3)).unwrap();
/// let gamma = |i: usize| c.window(i).collect::<Vec<usize>>();
/// let rule = Rule { anchors: Some(&gamma), history: HistorySource::StageMatched, history_len: 3 };
/// let mut b = GraphBuilder::new(&c);
/// b.planner().unwrap(); // publishes the anchors the rule reads
/// b.rollout(&rule).unwrap();
/// let g = b.finish("gamma2-h3");
/// assert_eq!((g.history_banks, g.history_capacity), (4, 3)); // a bank per stage, H chunks each
/// // Chunk 5 (latents 15..18) at stage 2 reads anchors {10, 20} (indices 1, 2), then the
/// // stage-2 K/V of chunks 2..5.
/// let n = g.nodes.iter().find(|n| n.kind == NodeKind::Render && n.unit == Unit::Chunk(5) && n.level == 2).unwrap();
/// let want: Vec<KvKey> =
///     [KvKey::Anchor(1), KvKey::Anchor(2)].into_iter().chain((2..5).map(|chunk| KvKey::Chunk { bank: 2, chunk })).collect();
/// assert_eq!(n.reads, want);
///
/// // Without the planner nothing publishes the anchors: the rollout is refused.
/// assert!(GraphBuilder::new(&c).rollout(&rule).is_err());
/// ```
pub struct GraphBuilder<'a> {
    contract: &'a Contract,
    nodes: Vec<Node>,
    publisher: HashMap<KvKey, NodeId>,
}

impl<'a> GraphBuilder<'a> {
    /// An empty graph over `contract`.
    pub fn new(contract: &'a Contract) -> Self {
        Self { contract, nodes: Vec::new(), publisher: HashMap::new() }
    }

    /// The contract the graph is built over.
    pub fn contract(&self) -> &'a Contract {
        self.contract
    }

    /// Adds one forward and returns its id; everything it reads must have been published by an
    /// earlier node, and no key may be published twice ([`SchedError::Graph`] otherwise).
    pub fn push(&mut self, spec: NodeSpec) -> Result<NodeId> {
        let id = self.nodes.len();
        let mut deps: Vec<NodeId> = spec.source.into_iter().collect();
        for key in &spec.reads {
            let p = self.publisher.get(key).ok_or_else(|| {
                SchedError::Graph(format!("node {id} ({:?} {:?}) reads {key:?} which no earlier node publishes", spec.kind, spec.unit))
            })?;
            deps.push(*p);
        }
        deps.sort_unstable();
        deps.dedup();
        for key in &spec.publishes {
            if self.publisher.insert(*key, id).is_some() {
                return Err(SchedError::Graph(format!("{key:?} is published twice")));
            }
        }
        let c = self.contract;
        let (t, guided) = match spec.kind.is_planner() {
            true => (c.planner_timestep(spec.level), spec.kind == NodeKind::PlannerDenoise && c.planner_guided()),
            false => (c.timestep(spec.level), false),
        };
        self.nodes.push(Node {
            id,
            kind: spec.kind,
            unit: spec.unit,
            stage: spec.stage,
            level: spec.level,
            timesteps: vec![t; spec.positions.len()],
            positions: spec.positions,
            source: spec.source,
            reads: spec.reads,
            publishes: spec.publishes,
            deps,
            output: spec.output,
            passes: if guided { 2 } else { 1 },
        });
        Ok(id)
    }

    /// The graph named `schedule`. History banks and their capacity follow from the nodes: one
    /// bank per bank index published or read, holding the longest tail one node reads from a bank.
    pub fn finish(self, schedule: impl Into<String>) -> Graph {
        let mut banks = 0;
        let mut capacity = 0;
        for n in &self.nodes {
            let mut per_bank: HashMap<usize, usize> = HashMap::new();
            for key in n.reads.iter().chain(&n.publishes) {
                if let KvKey::Chunk { bank, .. } = key {
                    banks = banks.max(bank + 1);
                }
            }
            for key in &n.reads {
                if let KvKey::Chunk { bank, .. } = key {
                    *per_bank.entry(*bank).or_default() += 1;
                }
            }
            capacity = per_bank.values().copied().fold(capacity, usize::max);
        }
        Graph {
            schedule: schedule.into(),
            contract: self.contract.clone(),
            nodes: self.nodes,
            history_banks: banks,
            history_capacity: capacity,
        }
    }
}

/// Forward counts of a graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Counts {
    /// All model forwards (a guided planner step counts twice).
    pub forwards: usize,
    /// Forwards that only publish K/V ([`NodeKind::is_cache_update`]).
    pub cache_update_forwards: usize,
    /// Planner forwards, its cache-update forwards included.
    pub planner_forwards: usize,
    /// Forwards that advance output positions (renderer / baseline / bidirectional).
    pub renderer_forwards: usize,
}

impl Graph {
    /// The graph's forward counts (paper A.2.2), each node counted [`Node::passes`] times.
    pub fn counts(&self) -> Counts {
        let count = |f: &dyn Fn(NodeKind) -> bool| self.nodes.iter().filter(|n| f(n.kind)).map(|n| n.passes).sum();
        Counts {
            forwards: count(&|_| true),
            cache_update_forwards: count(&|k| k.is_cache_update()),
            planner_forwards: count(&|k| k.is_planner()),
            renderer_forwards: count(&|k| matches!(k, NodeKind::Render | NodeKind::Bidirectional)),
        }
    }

    /// Nodes whose x0 is final output, in position order.
    pub fn outputs(&self) -> Vec<&Node> {
        let mut out: Vec<&Node> = self.nodes.iter().filter(|n| n.output).collect();
        out.sort_by_key(|n| n.positions.first().copied());
        out
    }

    /// Anchor indices a node reads.
    pub fn anchor_reads(node: &Node) -> impl Iterator<Item = usize> + '_ {
        node.reads.iter().filter_map(|k| match k {
            KvKey::Anchor(m) => Some(*m),
            KvKey::Chunk { .. } => None,
        })
    }
}
