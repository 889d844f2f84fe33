use super::*;
use crate::contract::{Contract, ContractConfig};
use crate::schedule::ScheduleKind;

fn ff(latents: usize) -> Graph {
    ScheduleKind::FlashForward.build(&Contract::new(ContractConfig::new(latents)).unwrap()).unwrap()
}

#[test]
fn shared_planner_runs_first_then_the_wavefront() {
    let sim = simulate(&ff(81), 4, CostModel::new(2.0)).unwrap();
    assert_eq!(sim.seconds, 2.0 * 45.0);
    assert_eq!(sim.rounds, 45.0);
    // chunk 0 leaves stage 3 after the 15 planner forwards and 4 stages
    assert_eq!(sim.ttff_seconds, 2.0 * 19.0);
}

#[test]
fn dedicated_planner_exposes_only_the_first_block() {
    let sim = simulate(&ff(81), 4, CostModel { planner_devices: 1, ..CostModel::new(1.0) }).unwrap();
    assert_eq!(sim.seconds, 5.0 + 27.0 + 3.0);
    assert_eq!(sim.ttff_seconds, 9.0);
    // a faster (context-parallel) planner cannot help once planning stays ahead; its 3-frame
    // blocks shard by whole frames, so 5 devices speed a forward up 3×
    let cp = simulate(&ff(81), 4, CostModel { planner_devices: 5, ..CostModel::new(1.0) }).unwrap();
    assert!((cp.seconds - (5.0 / 3.0 + 27.0 + 3.0)).abs() < 1e-9, "{}", cp.seconds);
}

#[test]
fn fewer_devices_than_stages_serialise_stages() {
    let one = simulate(&ff(21), 1, CostModel::new(1.0)).unwrap();
    assert_eq!(one.seconds, 5.0 + 7.0 * 4.0);
    assert_eq!(one.slowest_worker_busy_seconds, one.seconds);
}

#[test]
fn replay_respects_dependencies_and_worker_exclusivity() {
    let g = ScheduleKind::Hiar.build(&Contract::new(ContractConfig::new(81)).unwrap()).unwrap();
    let trace = replay(&g, &Placement::wavefront(4), |_| 1.0);
    for s in &trace.spans {
        for &d in &g.nodes[s.node].deps {
            assert!(trace.spans[d].end <= s.start);
        }
    }
    let mut by_worker: Vec<Vec<(f64, f64)>> = vec![vec![]; trace.workers];
    for s in &trace.spans {
        by_worker[s.worker].push((s.start, s.end));
    }
    for spans in &mut by_worker {
        spans.sort_by(|a, b| a.0.total_cmp(&b.0));
        assert!(spans.windows(2).all(|w| w[0].1 <= w[1].0));
    }
}

#[test]
fn bad_cost_model_is_rejected() {
    let err = simulate(&ff(21), 4, CostModel::new(0.0)).unwrap_err();
    assert!(err.to_string().contains("forward cost"), "{err}");
    let err = simulate(&ff(21), 0, CostModel::new(1.0)).unwrap_err();
    assert!(err.to_string().contains("at least one stage worker"), "{err}");
}

#[test]
fn forward_cost_is_linear_in_frames() {
    let c = Contract::new(ContractConfig::new(22)).unwrap();
    let bidi = ScheduleKind::Bidirectional.build(&c).unwrap();
    let sim = simulate(&bidi, 4, CostModel::new(3.0)).unwrap();
    assert!((sim.seconds - 4.0 * 22.0).abs() < 1e-9);
    // the last chunk of L = 22 has one latent: its 4 stages cost 4 × 1 s
    let rcm = ScheduleKind::NcCausalRcm.build(&c).unwrap();
    let sim = simulate(&rcm, 4, CostModel::new(3.0)).unwrap();
    assert!((sim.seconds - (7.0 * 4.0 * 3.0 + 4.0)).abs() < 1e-9);
}

#[test]
fn worker_names_follow_the_placement() {
    assert_eq!(Placement::wavefront(2).names(4), vec!["stages 0, 2", "stages 1, 3"]);
    assert_eq!(Placement::streaming(4).names(4), vec!["stage 0", "stage 1", "stage 2", "stage 3", "planner"]);
    assert_eq!(Placement::wavefront(5).names(4)[4], "worker 4 (idle)");
}

#[test]
fn guided_planner_steps_cost_two_forwards() {
    let build = |guidance: f64| {
        let c = Contract::new(ContractConfig::new(21).with_planner_steps(10).with_planner_guidance(guidance)).unwrap();
        ScheduleKind::FlashForward.build(&c).unwrap()
    };
    let cost = CostModel::new(1.0);
    // one block of 3 anchors: 10 steps (× 2 guided) + 1 cache forward, then 7 chunks on 4 stages
    let (plain, guided) = (simulate(&build(1.0), 4, cost).unwrap(), simulate(&build(5.0), 4, cost).unwrap());
    assert_eq!(plain.seconds, 11.0 + 10.0);
    assert_eq!(guided.seconds, 21.0 + 10.0);
    assert_eq!(guided.ttff_seconds, 21.0 + 4.0);
}

/// K/V of 320 bytes a frame (2 layers × K and V × 4 channels × 10 tokens × 2 bytes), latents of
/// 100 bytes a frame, 1000 bytes of role weights.
fn toy_comm(link: Link) -> CommModel {
    let kv = crate::bank::KvDims { layers: 2, dim: 4, tokens_per_frame: 10, dtype_bytes: 2 };
    let traffic = Traffic { kv, latent_frame_bytes: 100, role_weight_bytes: 1000 };
    CommModel { link, host: link, traffic, cp_overhead_seconds: 0.0, ridge_tokens: 0.0 }
}

#[test]
fn links_cost_latency_plus_bytes_over_bandwidth() {
    assert!((Link::NVLINK.seconds(450e9) - (1.0 + 10e-6)).abs() < 1e-12);
    assert!((Link::INTER_NODE.seconds(50e9) - (1.0 + 20e-6)).abs() < 1e-12);
    let bad = CommModel { link: Link { gbps: 0.0, latency_us: 1.0 }, ..toy_comm(Link::NVLINK) };
    let err = simulate(&ff(21), 4, CostModel { comm: Some(bad), ..CostModel::new(1.0) }).unwrap_err();
    assert!(err.to_string().contains("device link"), "{err}");
}

#[test]
fn a_context_parallel_planner_runs_on_every_device_at_once() {
    let cp = CostModel { planner_cp: true, ..CostModel::new(1.0) };
    let sim = simulate(&ff(81), 4, cp).unwrap();
    // 15 planner forwards over 3-anchor blocks: one frame per shard (the 4th device idles), 1/3
    assert!((sim.seconds - (5.0 + 27.0 + 3.0)).abs() < 1e-9, "{}", sim.seconds);
    let g = ff(81);
    for n in g.nodes.iter().filter(|n| n.kind.is_planner()) {
        let spans: Vec<_> = sim.trace.spans.iter().filter(|s| s.node == n.id).collect();
        assert_eq!(spans.iter().map(|s| s.worker).collect::<Vec<_>>(), [0, 1, 2, 3]);
        assert!(spans.iter().all(|s| s.start == spans[0].start && s.end == spans[0].end));
    }
    let both = CostModel { planner_devices: 1, ..cp };
    assert!(simulate(&ff(81), 4, both).unwrap_err().to_string().contains("context parallelism"));
}

#[test]
fn comm_bytes_count_cp_exchanges_swaps_and_latents() {
    let cost = CostModel { planner_cp: true, comm: Some(toy_comm(Link { gbps: 8.0, latency_us: 0.0 })), ..CostModel::new(1.0) };
    let sim = simulate(&ff(21), 3, cost).unwrap();
    // 5 planner forwards (4 stages + the clean endpoint), each all-gathering one 1-frame shard of
    // 160 bytes per layer on a ring of 3: 2 layers × 3 devices × 2 steps × 160 bytes
    let cp = 5.0 * 2.0 * 3.0 * 2.0 * 160.0;
    // every device planned, then renders: 3 swaps; 7 chunks cross 3 stage boundaries with 3 frames
    let (swaps, latents) = (3.0 * 1000.0, 7.0 * 3.0 * 300.0);
    assert_eq!(sim.comm_bytes, cp + swaps + latents);
    // 1 GB/s and no latency: a second per 1e9 bytes
    assert!((sim.comm_seconds - sim.comm_bytes / 1e9).abs() < 1e-12 * sim.comm_seconds, "{}", sim.comm_seconds);
    // the exchange sits on the critical path: 2 layers × 2 ring steps of 160 bytes per forward
    let free = simulate(&ff(21), 3, CostModel { comm: None, ..cost }).unwrap();
    assert!(sim.seconds > free.seconds + 5.0 * 2.0 * 2.0 * 160.0 / 1e9);
}

#[test]
fn a_dedicated_planner_sends_anchor_blocks_to_every_renderer() {
    let cost = CostModel { planner_devices: 1, comm: Some(toy_comm(Link::INTER_NODE)), ..CostModel::new(1.0) };
    let sim = simulate(&ff(81), 4, cost).unwrap();
    // 4 renderers × 3 anchor blocks of 3 frames × 320 bytes; 27 chunks × 3 boundaries × 300 bytes;
    // no swap: the planner device never renders
    assert_eq!(sim.comm_bytes, 4.0 * 3.0 * 3.0 * 320.0 + 27.0 * 3.0 * 300.0);
}

#[test]
fn slow_links_make_context_parallelism_lose() {
    let traffic = Traffic::new(&ff_model::dit::DitConfig::wan_t2v_1_3b(), 480, 832, 1_400_000_000);
    let run = |cp: bool, link: Link| {
        let comm = CommModel { link, ..CommModel::h100(traffic) };
        simulate(&ff(81), 4, CostModel { planner_cp: cp, comm: Some(comm), ..CostModel::new(0.137) }).unwrap().seconds
    };
    assert!(run(true, Link::NVLINK) < run(false, Link::NVLINK));
    let slow = Link { gbps: 10.0, latency_us: 100.0 };
    assert!(run(true, slow) > run(false, slow));
}
