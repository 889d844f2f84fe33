//! Graph builders of the five schedules. All autoregressive schedules share one chunk rollout;
//! they differ in which history bank a forward reads and which forwards publish into it.

use super::ScheduleKind;
use super::graph::{Graph, GraphBuilder, KvKey, NodeId, NodeKind, NodeSpec, Unit};
use crate::contract::Contract;
use crate::error::Result;

pub(super) fn build(kind: ScheduleKind, c: &Contract) -> Result<Graph> {
    let mut b = GraphBuilder::new(c);
    let s = c.stages();
    let (banks, capacity) = match kind {
        ScheduleKind::FlashForward => {
            if c.config.use_anchors {
                planner(&mut b, c)?;
            }
            let h = c.config.history;
            rollout(&mut b, c, kind, h)?;
            (if h > 0 { s } else { 0 }, h)
        }
        ScheduleKind::SelfForcing | ScheduleKind::NcCausalRcm => {
            rollout(&mut b, c, kind, c.baseline_history())?;
            (1, c.baseline_history())
        }
        ScheduleKind::Hiar => {
            rollout(&mut b, c, kind, c.baseline_history())?;
            (s, c.baseline_history())
        }
        ScheduleKind::Bidirectional => {
            let positions: Vec<usize> = (0..c.config.latents).collect();
            let mut source = None;
            for k in 0..s {
                let spec = NodeSpec {
                    kind: NodeKind::Bidirectional,
                    unit: Unit::Clip,
                    stage: k,
                    level: k,
                    positions: positions.clone(),
                    source,
                    reads: vec![],
                    publishes: vec![],
                    output: k + 1 == s,
                };
                source = Some(b.push(spec)?);
            }
            (0, 0)
        }
    };
    Ok(b.finish(kind, banks, capacity))
}

/// Autoregressive planner over anchor blocks: S denoising forwards, then one clean-endpoint
/// forward publishing the block's anchor K/V; each reads the last `planner_context` anchors.
fn planner(b: &mut GraphBuilder, c: &Contract) -> Result<()> {
    let s = c.stages();
    for (j, block) in c.blocks.iter().enumerate() {
        let positions: Vec<usize> = c.anchors[block.clone()].to_vec();
        let reads: Vec<KvKey> = c.planner_context(j).map(KvKey::Anchor).collect();
        let mut source = None;
        for level in 0..=s {
            let cache = level == s;
            let spec = NodeSpec {
                kind: if cache { NodeKind::PlannerCache } else { NodeKind::PlannerDenoise },
                unit: Unit::Block(j),
                stage: level.min(s - 1),
                level,
                positions: positions.clone(),
                source,
                reads: reads.clone(),
                publishes: if cache { block.clone().map(KvKey::Anchor).collect() } else { vec![] },
                output: false,
            };
            source = Some(b.push(spec)?);
        }
    }
    Ok(())
}

/// The chunk × stage rollout of the autoregressive schedules with `history` chunks of memory.
fn rollout(b: &mut GraphBuilder, c: &Contract, kind: ScheduleKind, history: usize) -> Result<()> {
    let s = c.stages();
    let n = c.num_chunks();
    for (i, chunk) in c.chunks.iter().enumerate() {
        let positions: Vec<usize> = chunk.clone().collect();
        let has_next = i + 1 < n;
        let bank = |k: usize| match kind {
            ScheduleKind::FlashForward | ScheduleKind::Hiar => k,
            _ => 0,
        };
        let reads = |k: usize| -> Vec<KvKey> {
            let anchors = match kind {
                ScheduleKind::FlashForward if c.config.use_anchors => c.window(i).map(KvKey::Anchor).collect(),
                _ => vec![],
            };
            let tail = c.tail(i, history).map(|chunk| KvKey::Chunk { bank: bank(k), chunk });
            anchors.into_iter().chain(tail).collect()
        };
        let mut source: Option<NodeId> = None;
        for k in 0..s {
            let publishes = match kind {
                ScheduleKind::FlashForward if history > 0 && has_next => vec![KvKey::Chunk { bank: k, chunk: i }],
                ScheduleKind::NcCausalRcm if k + 1 == s && has_next => vec![KvKey::Chunk { bank: 0, chunk: i }],
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
            let id = b.push(spec)?;
            source = Some(id);
            if kind == ScheduleKind::Hiar && has_next {
                reencode(b, i, &positions, k, k + 1, id, reads(k), KvKey::Chunk { bank: k, chunk: i })?;
            }
        }
        if kind == ScheduleKind::SelfForcing && has_next {
            let last = source.expect("at least one stage");
            reencode(b, i, &positions, s - 1, s, last, reads(s - 1), KvKey::Chunk { bank: 0, chunk: i })?;
        }
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn reencode(
    b: &mut GraphBuilder,
    chunk: usize,
    positions: &[usize],
    stage: usize,
    level: usize,
    source: NodeId,
    reads: Vec<KvKey>,
    key: KvKey,
) -> Result<NodeId> {
    b.push(NodeSpec {
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
