//! Graph builders. Every autoregressive schedule is the same chunk × stage rollout under a
//! [`Rule`]: which anchors chunk `i` reads (`Γ(i)`), where its history comes from and how long it
//! is. The five built-in schedules are rules; a custom contract is another rule (see the
//! `flashforward` crate's `custom_schedule` example).

use super::ScheduleKind;
use super::graph::{Graph, GraphBuilder, KvKey, NodeId, NodeKind, NodeSpec, Unit};
use crate::contract::Contract;
use crate::error::Result;

/// Where a renderer chunk's history K/V comes from, and which forwards publish it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum HistorySource {
    /// Chunk `i` at stage `k` reads the stage-`k` K/V its predecessors' own stage-`k` forwards
    /// published: one bank per stage, no extra forwards (FlashForward).
    StageMatched,
    /// The K/V of the predecessors' final-stage forwards: one bank (N-C-Causal-rCM).
    FinalStage,
    /// The K/V of one clean-endpoint re-encode forward per chunk: one bank (Self-Forcing).
    CleanReencode,
    /// At every stage `k`, the predecessors re-encoded at the next level: one bank per stage, one
    /// re-encode forward per chunk and stage (HiAR).
    NextLevelReencode,
}

/// `Γ(i)`: the anchor indices renderer chunk `i` reads.
pub type AnchorWindow<'a> = dyn Fn(usize) -> Vec<usize> + 'a;

/// The state contract of a renderer rollout: what chunk `i` at stage `k` reads.
pub struct Rule<'a> {
    /// `Γ(i)`, read before the history (`None`: no anchors). Anchors must be published first,
    /// e.g. by [`GraphBuilder::planner`].
    pub anchors: Option<&'a AnchorWindow<'a>>,
    /// Where the history K/V comes from.
    pub history: HistorySource,
    /// `H`: chunks of history (the tail `i − H..i`; 0: none).
    pub history_len: usize,
}

impl GraphBuilder<'_> {
    /// The autoregressive planner over anchor blocks: one denoising forward per planner level
    /// (the S stages, or the contract's Euler steps) per block, then one clean-endpoint forward
    /// publishing the block's anchor K/V; each reads the last `planner_context` anchors.
    pub fn planner(&mut self) -> Result<()> {
        let c = self.contract();
        let (s, levels) = (c.stages(), c.planner_levels());
        for (j, block) in c.blocks.iter().enumerate() {
            let positions: Vec<usize> = c.anchors[block.clone()].to_vec();
            let reads: Vec<KvKey> = c.planner_context(j).map(KvKey::Anchor).collect();
            let mut source = None;
            for level in 0..=levels {
                let cache = level == levels;
                let spec = NodeSpec {
                    kind: if cache { NodeKind::PlannerCache } else { NodeKind::PlannerDenoise },
                    unit: Unit::Block(j),
                    stage: (level * s / levels).min(s - 1),
                    level,
                    positions: positions.clone(),
                    source,
                    reads: reads.clone(),
                    publishes: if cache { block.clone().map(KvKey::Anchor).collect() } else { vec![] },
                    output: false,
                };
                source = Some(self.push(spec)?);
            }
        }
        Ok(())
    }

    /// The chunk × stage rollout under `rule`: chunk `i` at stage `k` reads `Γ(i)`, then its
    /// history tail oldest first.
    pub fn rollout(&mut self, rule: &Rule) -> Result<()> {
        let c = self.contract();
        let s = c.stages();
        let n = c.num_chunks();
        let h = rule.history_len;
        let bank = |k: usize| match rule.history {
            HistorySource::StageMatched | HistorySource::NextLevelReencode => k,
            HistorySource::FinalStage | HistorySource::CleanReencode => 0,
        };
        for (i, chunk) in c.chunks.iter().enumerate() {
            let positions: Vec<usize> = chunk.clone().collect();
            let keeps = h > 0 && i + 1 < n;
            let anchors: Vec<KvKey> = rule.anchors.map_or_else(Vec::new, |gamma| gamma(i).into_iter().map(KvKey::Anchor).collect());
            let reads = |k: usize| -> Vec<KvKey> {
                let tail = c.tail(i, h).map(|chunk| KvKey::Chunk { bank: bank(k), chunk });
                anchors.iter().copied().chain(tail).collect()
            };
            let mut source: Option<NodeId> = None;
            for k in 0..s {
                let publishes = match rule.history {
                    HistorySource::StageMatched if keeps => vec![KvKey::Chunk { bank: k, chunk: i }],
                    HistorySource::FinalStage if keeps && k + 1 == s => vec![KvKey::Chunk { bank: 0, chunk: i }],
                    _ => vec![],
                };
                let spec = NodeSpec {
                    kind: NodeKind::Render,
                    unit: Unit::Chunk(i),
                    stage: k,
                    level: k,
                    positions: positions.clone(),
                    source,
                    reads: reads(k),
                    publishes,
                    output: k + 1 == s,
                };
                let id = self.push(spec)?;
                source = Some(id);
                if rule.history == HistorySource::NextLevelReencode && keeps {
                    self.reencode(i, &positions, k, k + 1, id, reads(k), KvKey::Chunk { bank: k, chunk: i })?;
                }
            }
            if rule.history == HistorySource::CleanReencode && keeps {
                let last = source.expect("at least one stage");
                self.reencode(i, &positions, s - 1, s, last, reads(s - 1), KvKey::Chunk { bank: 0, chunk: i })?;
            }
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn reencode(
        &mut self,
        chunk: usize,
        positions: &[usize],
        stage: usize,
        level: usize,
        source: NodeId,
        reads: Vec<KvKey>,
        key: KvKey,
    ) -> Result<NodeId> {
        self.push(NodeSpec {
            kind: NodeKind::ReEncode,
            unit: Unit::Chunk(chunk),
            stage,
            level,
            positions: positions.to_vec(),
            source: Some(source),
            reads,
            publishes: vec![key],
            output: false,
        })
    }

    /// `S` whole-clip forwards with full attention (the bidirectional baseline).
    fn bidirectional(&mut self) -> Result<()> {
        let c = self.contract();
        let positions: Vec<usize> = (0..c.config.latents).collect();
        let mut source = None;
        for k in 0..c.stages() {
            let spec = NodeSpec {
                kind: NodeKind::Bidirectional,
                unit: Unit::Clip,
                stage: k,
                level: k,
                positions: positions.clone(),
                source,
                reads: vec![],
                publishes: vec![],
                output: k + 1 == c.stages(),
            };
            source = Some(self.push(spec)?);
        }
        Ok(())
    }
}

pub(super) fn build(kind: ScheduleKind, c: &Contract) -> Result<Graph> {
    let mut b = GraphBuilder::new(c);
    let window = |i: usize| c.window(i).collect::<Vec<usize>>();
    let baseline = |history| Rule { anchors: None, history, history_len: c.baseline_history() };
    match kind {
        ScheduleKind::FlashForward => {
            let anchors = c.config.use_anchors.then_some(&window as &AnchorWindow);
            if anchors.is_some() {
                b.planner()?;
            }
            b.rollout(&Rule { anchors, history: HistorySource::StageMatched, history_len: c.config.history })?;
        }
        ScheduleKind::SelfForcing => b.rollout(&baseline(HistorySource::CleanReencode))?,
        ScheduleKind::NcCausalRcm => b.rollout(&baseline(HistorySource::FinalStage))?,
        ScheduleKind::Hiar => b.rollout(&baseline(HistorySource::NextLevelReencode))?,
        ScheduleKind::Bidirectional => b.bidirectional()?,
    }
    Ok(b.finish(kind.name()))
}
