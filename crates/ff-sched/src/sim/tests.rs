use super::*;
use crate::contract::{Contract, ContractConfig};
use crate::schedule::ScheduleKind;

fn ff(latents: usize) -> Graph {
    ScheduleKind::FlashForward.build(&Contract::new(ContractConfig::new(latents)).unwrap()).unwrap()
}

#[test]
fn shared_planner_runs_first_then_the_wavefront() {
    let sim = simulate(&ff(81), 4, CostModel { forward_seconds: 2.0, planner_devices: 0 }).unwrap();
    assert_eq!(sim.seconds, 2.0 * 45.0);
    assert_eq!(sim.rounds, 45.0);
    // chunk 0 leaves stage 3 after the 15 planner forwards and 4 stages
    assert_eq!(sim.ttff_seconds, 2.0 * 19.0);
}

#[test]
fn dedicated_planner_exposes_only_the_first_block() {
    let sim = simulate(&ff(81), 4, CostModel { forward_seconds: 1.0, planner_devices: 1 }).unwrap();
    assert_eq!(sim.seconds, 5.0 + 27.0 + 3.0);
    assert_eq!(sim.ttff_seconds, 9.0);
    // a faster (context-parallel) planner cannot help once planning stays ahead
    let cp = simulate(&ff(81), 4, CostModel { forward_seconds: 1.0, planner_devices: 5 }).unwrap();
    assert_eq!(cp.seconds, 1.0 + 27.0 + 3.0);
}

#[test]
fn fewer_devices_than_stages_serialise_stages() {
    let one = simulate(&ff(21), 1, CostModel { forward_seconds: 1.0, planner_devices: 0 }).unwrap();
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
    let err = simulate(&ff(21), 4, CostModel { forward_seconds: 0.0, planner_devices: 0 }).unwrap_err();
    assert!(err.to_string().contains("forward cost"), "{err}");
    let err = simulate(&ff(21), 0, CostModel { forward_seconds: 1.0, planner_devices: 0 }).unwrap_err();
    assert!(err.to_string().contains("at least one stage worker"), "{err}");
}

#[test]
fn forward_cost_is_linear_in_frames() {
    let c = Contract::new(ContractConfig::new(22)).unwrap();
    let bidi = ScheduleKind::Bidirectional.build(&c).unwrap();
    let sim = simulate(&bidi, 4, CostModel { forward_seconds: 3.0, planner_devices: 0 }).unwrap();
    assert!((sim.seconds - 4.0 * 22.0).abs() < 1e-9);
    // the last chunk of L = 22 has one latent: its 4 stages cost 4 × 1 s
    let rcm = ScheduleKind::NcCausalRcm.build(&c).unwrap();
    let sim = simulate(&rcm, 4, CostModel { forward_seconds: 3.0, planner_devices: 0 }).unwrap();
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
    let cost = CostModel { forward_seconds: 1.0, planner_devices: 0 };
    // one block of 3 anchors: 10 steps (× 2 guided) + 1 cache forward, then 7 chunks on 4 stages
    let (plain, guided) = (simulate(&build(1.0), 4, cost).unwrap(), simulate(&build(5.0), 4, cost).unwrap());
    assert_eq!(plain.seconds, 11.0 + 10.0);
    assert_eq!(guided.seconds, 21.0 + 10.0);
    assert_eq!(guided.ttff_seconds, 21.0 + 4.0);
}
