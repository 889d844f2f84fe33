use super::*;
use crate::contract::{Contract, ContractConfig};

fn graph(kind: ScheduleKind, latents: usize, stages: usize) -> Graph {
    kind.build(&Contract::new(ContractConfig::new(latents).with_stages(stages)).unwrap()).unwrap()
}

#[test]
fn forward_counts_at_81_latents_match_the_paper() {
    let forwards = |k| graph(k, 81, 4).counts().forwards;
    assert_eq!(forwards(ScheduleKind::FlashForward), 123);
    assert_eq!(forwards(ScheduleKind::SelfForcing), 134);
    assert_eq!(forwards(ScheduleKind::Hiar), 212);
    assert_eq!(forwards(ScheduleKind::NcCausalRcm), 108);
    assert_eq!(forwards(ScheduleKind::Bidirectional), 4);
}

#[test]
fn forward_counts_follow_the_paper_formulas() {
    for latents in [1, 7, 21, 22, 25, 81, 141, 200, 261] {
        for s in 1..=5 {
            let c = Contract::new(ContractConfig::new(latents).with_stages(s)).unwrap();
            let (np, nc) = (c.num_blocks(), c.num_chunks());
            let ff = ScheduleKind::FlashForward.build(&c).unwrap().counts();
            assert_eq!(ff.forwards, np * (s + 1) + nc * s, "FF L={latents} S={s}");
            assert_eq!(ff.planner_forwards, np * (s + 1));
            assert_eq!(ff.cache_update_forwards, np);
            assert_eq!(ff.renderer_forwards, nc * s);
            let sf = ScheduleKind::SelfForcing.build(&c).unwrap().counts();
            assert_eq!(sf.forwards, nc * s + (nc - 1), "SF L={latents} S={s}");
            assert_eq!(sf.cache_update_forwards, nc - 1);
            let hiar = ScheduleKind::Hiar.build(&c).unwrap().counts();
            assert_eq!(hiar.forwards, nc * s + (nc - 1) * s, "HiAR L={latents} S={s}");
            assert_eq!(hiar.cache_update_forwards, (nc - 1) * s);
        }
    }
}

#[test]
fn rounds_follow_the_paper_formulas() {
    for latents in [21, 25, 81, 141, 261] {
        for s in 1..=5 {
            let c = Contract::new(ContractConfig::new(latents).with_stages(s)).unwrap();
            let (np, nc) = (c.num_blocks(), c.num_chunks());
            let rounds = |k: ScheduleKind| crate::sim::rounds(&k.build(&c).unwrap());
            assert_eq!(rounds(ScheduleKind::FlashForward), nc + np * (s + 1) + (s - 1), "FF L={latents} S={s}");
            assert_eq!(rounds(ScheduleKind::Hiar), 2 * nc - 1 + (s - 1), "HiAR L={latents} S={s}");
            assert_eq!(rounds(ScheduleKind::SelfForcing), nc * s + nc - 1, "SF L={latents} S={s}");
            assert_eq!(rounds(ScheduleKind::NcCausalRcm), nc * s);
            assert_eq!(rounds(ScheduleKind::Bidirectional), s);
        }
    }
}

/// Latent positions a read key stands for.
fn width(c: &Contract, key: &KvKey) -> usize {
    match key {
        KvKey::Anchor(_) => 1,
        KvKey::Chunk { chunk, .. } => c.chunks[*chunk].len(),
    }
}

#[test]
fn renderer_forwards_read_their_window_and_same_stage_history_only() {
    for latents in [21, 25, 81, 141] {
        let g = graph(ScheduleKind::FlashForward, latents, 4);
        let c = &g.contract;
        for n in g.nodes.iter().filter(|n| n.kind == NodeKind::Render) {
            let Unit::Chunk(i) = n.unit else { panic!("render node on {:?}", n.unit) };
            let anchors: Vec<usize> = Graph::anchor_reads(n).collect();
            assert_eq!(anchors, c.window(i).collect::<Vec<_>>(), "{n:?}");
            let history: Vec<KvKey> = n.reads.iter().filter(|k| matches!(k, KvKey::Chunk { .. })).copied().collect();
            let want: Vec<KvKey> = c.tail(i, 5).map(|chunk| KvKey::Chunk { bank: n.level, chunk }).collect();
            assert_eq!(history, want);
            assert!(history.len() <= 5);
            let positions: usize = n.reads.iter().map(|k| width(c, k)).sum::<usize>() + n.positions.len();
            assert!(positions <= 21, "{positions} positions");
        }
    }
}

#[test]
fn flashforward_wavefront_edges() {
    let g = graph(ScheduleKind::FlashForward, 81, 4);
    let render =
        |i: usize, k: usize| g.nodes.iter().find(|n| n.kind == NodeKind::Render && n.unit == Unit::Chunk(i) && n.level == k).unwrap().id;
    let cache = |j: usize| g.nodes.iter().find(|n| n.kind == NodeKind::PlannerCache && n.unit == Unit::Block(j)).unwrap().id;
    // chunk 7 (21-23) reads window {20,30,40}: blocks 0 and 1
    let mut want = vec![cache(0), cache(1), render(7, 1)];
    want.extend((2..7).map(|i| render(i, 2)));
    want.sort_unstable();
    assert_eq!(g.nodes[render(7, 2)].deps, want);
    assert_eq!(g.nodes[render(0, 0)].deps, vec![cache(0)]);
}

#[test]
fn flashforward_renderer_has_no_cache_update_only_forwards() {
    let g = graph(ScheduleKind::FlashForward, 141, 4);
    assert!(g.nodes.iter().all(|n| n.kind != NodeKind::ReEncode));
    assert!(g.nodes.iter().filter(|n| n.kind.is_cache_update()).all(|n| n.kind == NodeKind::PlannerCache));
    // every renderer forward but those of the last chunk publishes into its own stage bank
    let last = g.contract.num_chunks() - 1;
    for n in g.nodes.iter().filter(|n| n.kind == NodeKind::Render && n.unit != Unit::Chunk(last)) {
        assert_eq!(n.publishes.len(), 1);
    }
}

#[test]
fn planner_reads_at_most_18_anchors_before_its_block() {
    let g = graph(ScheduleKind::FlashForward, 261, 4);
    for n in g.nodes.iter().filter(|n| n.kind.is_planner()) {
        let Unit::Block(j) = n.unit else { panic!() };
        let reads: Vec<usize> = Graph::anchor_reads(n).collect();
        assert!(reads.len() <= 18);
        assert!(reads.iter().all(|&m| m < g.contract.blocks[j].start));
        assert_eq!(reads.len(), g.contract.blocks[j].start.min(18));
    }
}

#[test]
fn ablations_remove_the_anchor_bank_or_the_stage_bank() {
    let no_anchor = ContractConfig::new(81).with_use_anchors(false);
    let g = ScheduleKind::FlashForward.build(&Contract::new(no_anchor).unwrap()).unwrap();
    assert_eq!(g.counts().planner_forwards, 0);
    assert!(g.nodes.iter().all(|n| Graph::anchor_reads(n).next().is_none()));
    let no_history = ContractConfig::new(81).with_history(0);
    let g = ScheduleKind::FlashForward.build(&Contract::new(no_history).unwrap()).unwrap();
    assert_eq!(g.history_banks, 0);
    assert!(g.nodes.iter().all(|n| n.reads.iter().all(|k| matches!(k, KvKey::Anchor(_)))));
    // without history a chunk depends only on its own previous stage and its anchor blocks
    for n in g.nodes.iter().filter(|n| n.kind == NodeKind::Render) {
        assert!(n.deps.iter().all(|&d| Some(d) == n.source || g.nodes[d].kind == NodeKind::PlannerCache));
    }
}

#[test]
fn hiar_reencodes_each_predecessor_at_every_stage() {
    let g = graph(ScheduleKind::Hiar, 21, 4);
    let re: Vec<&Node> = g.nodes.iter().filter(|n| n.kind == NodeKind::ReEncode && n.unit == Unit::Chunk(0)).collect();
    assert_eq!(re.iter().map(|n| n.level).collect::<Vec<_>>(), vec![1, 2, 3, 4]);
    assert!(re.iter().all(|n| n.publishes == vec![KvKey::Chunk { bank: n.stage, chunk: 0 }]));
}

#[test]
fn dependencies_point_backwards_and_outputs_cover_the_video() {
    for kind in ScheduleKind::ALL {
        let g = graph(kind, 25, 3);
        for n in &g.nodes {
            assert!(n.deps.iter().all(|&d| d < n.id), "{kind} node {}", n.id);
        }
        let covered: Vec<usize> = g.outputs().iter().flat_map(|n| n.positions.iter().copied()).collect();
        assert_eq!(covered, (0..25).collect::<Vec<_>>(), "{kind}");
    }
}

#[test]
fn schedule_names_round_trip() {
    for kind in ScheduleKind::ALL {
        assert_eq!(kind.name().parse::<ScheduleKind>().unwrap(), kind);
    }
    assert!("wavefront".parse::<ScheduleKind>().unwrap_err().to_string().contains("flashforward"));
}

#[test]
fn a_custom_rule_reads_its_own_window_and_history() {
    // Γ of 2 anchors (the contract's windows of G = 2), stage-matched history of H = 3 chunks
    let c = Contract::new(ContractConfig::new(41).with_anchor_window(2).with_history(3)).unwrap();
    let gamma = |i: usize| c.window(i).collect::<Vec<usize>>();
    let mut b = GraphBuilder::new(&c);
    b.planner().unwrap();
    b.rollout(&Rule { anchors: Some(&gamma), history: HistorySource::StageMatched, history_len: 3 }).unwrap();
    let g = b.finish("gamma2-h3");
    assert_eq!(g.schedule, "gamma2-h3");
    assert_eq!((g.history_banks, g.history_capacity), (4, 3));
    let render =
        |i: usize, k: usize| g.nodes.iter().find(|n| n.kind == NodeKind::Render && n.unit == Unit::Chunk(i) && n.level == k).unwrap();
    // chunk 5 (15-17) reads anchors {10, 20} (indices 1, 2) and the stage-2 K/V of chunks 2..5
    let n = render(5, 2);
    let want: Vec<KvKey> =
        [KvKey::Anchor(1), KvKey::Anchor(2)].into_iter().chain((2..5).map(|chunk| KvKey::Chunk { bank: 2, chunk })).collect();
    assert_eq!(n.reads, want);
    // its dependencies: its own stage 1, the stage-2 forwards of chunks 2..4, the first anchor block
    let cache0 = g.nodes.iter().find(|n| n.kind == NodeKind::PlannerCache && n.unit == Unit::Block(0)).unwrap().id;
    let mut deps = vec![render(5, 1).id, cache0];
    deps.extend((2..5).map(|i| render(i, 2).id));
    deps.sort_unstable();
    assert_eq!(n.deps, deps);
    // forwards: the same count as FlashForward's (the rule changes reads, not forwards)
    let (np, nc) = (c.num_blocks(), c.num_chunks());
    assert_eq!(g.counts().forwards, np * 5 + nc * 4);
}

#[test]
fn the_builder_rejects_reads_of_unpublished_entries() {
    let c = Contract::new(ContractConfig::new(21)).unwrap();
    let gamma = |i: usize| c.window(i).collect::<Vec<usize>>();
    // anchors without a planner to publish them
    let err =
        GraphBuilder::new(&c).rollout(&Rule { anchors: Some(&gamma), history: HistorySource::StageMatched, history_len: 5 }).unwrap_err();
    assert!(err.to_string().contains("Anchor(0)"), "{err}");
}

#[test]
fn graphs_serialise_to_json_and_dot() {
    let g = graph(ScheduleKind::FlashForward, 21, 4);
    let json = serde_json::to_value(&g).unwrap();
    assert_eq!(json["schedule"], "flashforward");
    assert_eq!(json["contract"]["config"]["latents"], 21);
    assert_eq!(json["contract"]["anchors"], serde_json::json!([0, 10, 20]));
    let nodes = json["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), g.nodes.len());
    assert_eq!(nodes[4]["kind"], "planner-cache");
    assert_eq!(nodes[4]["publishes"], serde_json::json!([{ "anchor": 0 }, { "anchor": 1 }, { "anchor": 2 }]));
    let r = g.nodes.iter().find(|n| n.kind == NodeKind::Render && n.unit == Unit::Chunk(1) && n.level == 0).unwrap();
    assert_eq!(nodes[r.id]["reads"][3], serde_json::json!({ "chunk": { "bank": 0, "chunk": 0 } }));
    assert_eq!(nodes[r.id]["deps"], serde_json::json!(r.deps));
    let dot = g.to_dot();
    assert!(dot.starts_with("digraph \"flashforward\" {"));
    assert_eq!(dot.matches("[label=").count(), g.nodes.len());
    let edges: usize = g.nodes.iter().map(|n| n.deps.len()).sum();
    assert_eq!(dot.matches(" -> ").count(), edges);
    assert!(dot.contains(&format!("n{} -> n{} [style=dashed]", 4, r.id)), "anchor read edge");
}

#[test]
fn euler_planner_steps_are_nodes_and_guided_ones_count_twice() {
    for (latents, steps, guidance) in [(21, 5, 1.0), (81, 3, 4.0), (261, 50, 5.0)] {
        let base = ContractConfig::new(latents);
        let c = Contract::new(base.clone().with_planner_steps(steps).with_planner_guidance(guidance)).unwrap();
        let (np, nc, s) = (c.num_blocks(), c.num_chunks(), c.stages());
        let g = ScheduleKind::FlashForward.build(&c).unwrap();
        let passes = if guidance == 1.0 { 1 } else { 2 };
        let counts = g.counts();
        assert_eq!(counts.planner_forwards, np * (steps * passes + 1), "L={latents}");
        assert_eq!(counts.forwards, np * (steps * passes + 1) + nc * s);
        assert_eq!((counts.cache_update_forwards, counts.renderer_forwards), (np, nc * s));
        assert_eq!(g.nodes.len(), np * (steps + 1) + nc * s, "one node per Euler step");
        let block: Vec<&Node> = g.nodes.iter().filter(|n| n.unit == Unit::Block(0)).collect();
        let levels: Vec<usize> = block.iter().map(|n| n.level).collect();
        assert_eq!(levels, (0..=steps).collect::<Vec<_>>());
        assert!(block.windows(2).all(|p| p[1].source == Some(p[0].id) && p[1].timesteps[0] < p[0].timesteps[0]));
        assert_eq!(block[steps].timesteps[0], 0.0, "the cache forward is at the clean endpoint");
        assert!(block.iter().all(|n| n.stage < s));
        // the renderer's rollout is the distilled one's
        let distilled = ScheduleKind::FlashForward.build(&Contract::new(base).unwrap()).unwrap();
        let render =
            |g: &Graph| g.nodes.iter().filter(|n| !n.kind.is_planner()).map(|n| (n.level, n.timesteps.clone())).collect::<Vec<_>>();
        assert_eq!(render(&g), render(&distilled));
    }
}
