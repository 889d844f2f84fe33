//! Engine tests with a model-free runner whose outputs hash everything a node consumed, so any
//! routing or bank mistake changes the result.

use super::*;
use crate::bank::Entry;
use crate::contract::{Contract, ContractConfig};
use crate::error::BankName;
use crate::schedule::{KvKey, ScheduleKind};

#[derive(Clone, Debug)]
struct Kv {
    hash: u64,
    bytes: usize,
}

impl Entry for Kv {
    fn bytes(&self) -> usize {
        self.bytes
    }
}

const FRAME_BYTES: usize = 100;

fn mix(z: u64) -> u64 {
    let z = (z ^ (z >> 33)).wrapping_mul(0xff51_afd7_ed55_8ccd);
    z ^ (z >> 29)
}

struct Hashing {
    fail_at: Option<usize>,
}

impl Runner for Hashing {
    type Latent = u64;
    type Kv = Kv;

    fn run(&mut self, node: &Node, source: Option<&u64>, reads: &[&Kv]) -> Result<(u64, Vec<Kv>)> {
        if self.fail_at == Some(node.id) {
            return Err(SchedError::Config(format!("injected failure at node {}", node.id)));
        }
        let mut h = mix(node.id as u64 + 1) ^ source.copied().unwrap_or(17);
        for r in reads {
            h = mix(h ^ r.hash);
        }
        let kvs = node
            .publishes
            .iter()
            .enumerate()
            .map(|(j, k)| {
                let frames = match k {
                    KvKey::Anchor(_) => 1,
                    KvKey::Chunk { .. } => node.positions.len(),
                };
                Kv { hash: mix(h + j as u64), bytes: frames * FRAME_BYTES }
            })
            .collect();
        Ok((h, kvs))
    }
}

fn graph(kind: ScheduleKind, latents: usize) -> Graph {
    kind.build(&Contract::new(ContractConfig::new(latents)).unwrap()).unwrap()
}

fn run(g: &Graph, p: Placement) -> Result<Execution<u64>> {
    execute(g, &p, (0..p.workers()).map(|_| Hashing { fail_at: None }).collect())
}

#[test]
fn every_placement_reproduces_serial() {
    for kind in ScheduleKind::ALL {
        for latents in [21, 25, 47] {
            let g = graph(kind, latents);
            let serial = run(&g, Placement::serial()).unwrap();
            assert_eq!(serial.outputs.len(), g.outputs().len());
            for p in [Placement::wavefront(4), Placement::streaming(4), Placement::wavefront(2), Placement::streaming(3)] {
                let other = run(&g, p).unwrap();
                assert_eq!(other.outputs, serial.outputs, "{kind} L={latents} {p:?}");
                assert_eq!(other.trace.spans.len(), g.nodes.len());
            }
        }
    }
}

#[test]
fn measured_bank_bytes_stay_within_the_plan_and_do_not_grow_with_length() {
    // (the planner's entries in flight, beyond its plan, are checked in `flow_tests`)
    let peak = |latents, p: Placement| {
        let g = graph(ScheduleKind::FlashForward, latents);
        let e = run(&g, p).unwrap();
        for (used, plan) in e.peak_bank_bytes.iter().zip(&e.banks).take(p.stage_workers) {
            assert!(*used <= plan.frames * FRAME_BYTES, "{used} > {plan:?}");
        }
        e.peak_bank_bytes[..p.stage_workers].to_vec()
    };
    assert_eq!(peak(261, Placement::streaming(4)), peak(401, Placement::streaming(4)));
    // stage workers 1..3 of the shared wavefront hold the same at any length
    assert_eq!(peak(261, Placement::wavefront(4))[1..], peak(401, Placement::wavefront(4))[1..]);
    // the stage bank of a stage worker holds H = 5 chunks of 3 latents
    let g = graph(ScheduleKind::FlashForward, 261);
    let plan = crate::bank::bank_plan(&g, &Placement::streaming(4));
    assert_eq!(plan[2].history_banks, vec![2]);
    assert_eq!(plan[2].frames, plan[2].anchor_slots + 15);
    assert_eq!(plan[4].history_banks, Vec::<usize>::new()); // the planner worker
}

#[test]
fn a_failing_worker_reports_its_own_error() {
    let g = graph(ScheduleKind::FlashForward, 47);
    let p = Placement::streaming(4);
    let fail = g.nodes.iter().find(|n| n.kind == crate::schedule::NodeKind::Render && n.level == 2).unwrap().id;
    let runners = (0..p.workers()).map(|_| Hashing { fail_at: Some(fail) }).collect();
    let err = execute(&g, &p, runners).unwrap_err();
    assert!(err.to_string().contains(&format!("injected failure at node {fail}")), "{err}");
}

#[test]
fn reading_an_unpublished_entry_is_a_typed_error() {
    let mut g = graph(ScheduleKind::FlashForward, 21);
    let cache = g.nodes.iter().position(|n| n.kind == crate::schedule::NodeKind::PlannerCache).unwrap();
    g.nodes[cache].publishes.clear();
    let err = run(&g, Placement::serial()).unwrap_err();
    assert!(matches!(err, SchedError::NotPublished { bank: BankName::Anchor, index: 0 }), "{err}");
}

#[test]
fn batched_waves_reproduce_serial_in_r_forwards() {
    for kind in ScheduleKind::ALL {
        for latents in [21, 25, 81] {
            let g = graph(kind, latents);
            let serial = run(&g, Placement::serial()).unwrap();
            let batched = execute_batched(&g, Hashing { fail_at: None }).unwrap();
            assert_eq!(batched.outputs, serial.outputs, "{kind} L={latents}");
            // one forward per wave (the graph's rounds on one worker per stage), split only where
            // nodes read contexts of different sizes: the warm-up diagonals, whose chunks have
            // fewer than H predecessors (at most H + 1 sizes per stage), and a shorter last chunk
            if matches!(kind, ScheduleKind::FlashForward | ScheduleKind::Hiar) {
                let rounds = crate::sim::rounds(&g);
                let (history, stages) = (g.contract.config.history, g.contract.stages());
                let extra = batched.forwards - rounds;
                assert!(batched.forwards >= rounds && extra <= (history + 2) * stages, "{kind} L={latents}: {extra} extra");
            }
        }
    }
}

#[test]
fn flashforward_waves_are_anti_diagonals() {
    let g = graph(ScheduleKind::FlashForward, 81);
    for wave in waves(&g).iter().filter(|w| g.nodes[w[0]].kind == crate::schedule::NodeKind::Render) {
        let diag: Vec<usize> = wave
            .iter()
            .map(|&id| match g.nodes[id].unit {
                crate::schedule::Unit::Chunk(i) => i + g.nodes[id].level,
                other => panic!("{other:?}"),
            })
            .collect();
        assert!(diag.windows(2).all(|d| d[0] == d[1]), "{diag:?}");
        assert!(wave.len() <= 4);
    }
}
