//! Layout and mask invariants: counts of the paper's layout, every packed rule equal to what the
//! FlashForward inference graph reads, isolation of the sequences, shared noise, config errors.

use super::small_config;
use crate::sft::{Draw, FrameKind, Group, PackedLayout, SftConfig, SftObjective, pack};
use crate::{TrainError, TrainRng};
use burn::backend::NdArray;
use burn::tensor::{Tensor, TensorData};
use ff_model::dit::Role;
use ff_sched::schedule::{KvKey, NodeKind, Unit};
use ff_sched::{Contract, ScheduleKind};
use std::collections::BTreeSet;

#[test]
fn paper_layout_has_the_papers_frame_counts() {
    let objective = SftObjective::new(SftConfig::new()).unwrap();
    let layout = objective.layout(&[1, 4, 6, 9]);
    assert_eq!(layout.len(), 155, "9 + 9 + 81 frames of the clip, 4 × (6 + 8) of the crops");
    let sizes: Vec<usize> = Group::ALL.iter().map(|&g| layout.group_frames(g).len()).collect();
    assert_eq!(sizes, vec![9, 81, 32]);
    let clean_per_sequence: Vec<usize> = layout.sequences.iter().map(|s| s.clean.iter().flatten().count()).collect();
    assert_eq!(clean_per_sequence, vec![9, 6, 6, 6, 6]);
    for (n, &o) in [1, 4, 6, 9].iter().enumerate() {
        let crop: Vec<_> = layout.frames.iter().filter(|f| f.sequence == n + 1 && f.kind == FrameKind::Planner).collect();
        assert_eq!(crop.iter().map(|f| f.position).collect::<Vec<_>>(), (0..8).map(|m| 10 * m).collect::<Vec<_>>());
        assert!(crop.iter().all(|f| f.latent == o + f.position && f.role() == Role::Planner));
    }
    let fl = layout.frame_layout();
    let renderer: Vec<usize> = (0..155).filter(|&f| fl.roles[f] == Role::Renderer).collect();
    assert_eq!(renderer.iter().map(|&f| fl.positions[f]).collect::<Vec<_>>(), (0..81).collect::<Vec<_>>());
    let t = layout.timesteps(500.0);
    assert!(layout.frames.iter().zip(&t).all(|(f, &t)| (t == 0.0) == (f.kind == FrameKind::Clean)));
}

/// Frames a packed query frame may attend to.
fn keys(layout: &PackedLayout, q: usize) -> BTreeSet<usize> {
    (0..layout.len()).filter(|&k| layout.mask.is_allowed(q, k)).collect()
}

/// For every node of the FlashForward graph over `contract`, the packed frames of the node's own
/// unit must see exactly the frames holding what the node reads, plus themselves. Returns the
/// query frames checked.
fn check_against_graph(layout: &PackedLayout, sequence: usize, contract: &Contract) -> BTreeSet<usize> {
    let graph = ScheduleKind::FlashForward.build(contract).unwrap();
    let s = &layout.sequences[sequence];
    let anchor = |p: usize| contract.anchors.iter().position(|&a| a == p).unwrap();
    let mut checked = BTreeSet::new();
    for node in &graph.nodes {
        let own: Vec<usize> = match (node.kind, node.unit) {
            (NodeKind::Render, Unit::Chunk(_)) if s.renderer.is_empty() => continue,
            (NodeKind::Render, Unit::Chunk(_)) => node.positions.iter().map(|&p| s.renderer[p]).collect(),
            (NodeKind::PlannerDenoise, Unit::Block(_)) => node.positions.iter().map(|&p| s.planner[anchor(p)]).collect(),
            (NodeKind::PlannerCache, Unit::Block(_)) => node.positions.iter().filter_map(|&p| s.clean[anchor(p)]).collect(),
            other => panic!("unexpected node {other:?} in a FlashForward graph"),
        };
        let read = node.reads.iter().flat_map(|key| -> Vec<usize> {
            match *key {
                KvKey::Anchor(m) => {
                    vec![s.clean[m].unwrap_or_else(|| panic!("node {} reads anchor {m}, which has no clean copy", node.id))]
                }
                KvKey::Chunk { chunk, .. } => contract.chunks[chunk].clone().map(|p| s.renderer[p]).collect(),
            }
        });
        let expected: BTreeSet<usize> = own.iter().copied().chain(read).collect();
        for &q in &own {
            assert_eq!(keys(layout, q), expected, "frame {q} ({:?}) vs node {} {:?} {:?}", layout.frames[q], node.id, node.kind, node.unit);
            checked.insert(q);
        }
    }
    checked
}

#[test]
fn every_packed_rule_is_a_read_of_the_inference_graph() {
    let configs = [
        SftConfig::new(),
        SftConfig::new().with_latents(21),
        SftConfig::new().with_latents(141).with_rebased_crops(2),
        small_config(),
        SftConfig::new().with_latents(30).with_anchor_stride(7).with_planner_block(2).with_chunk(4).with_history(1).with_planner_context(3),
    ];
    for config in configs {
        let objective = SftObjective::new(config.clone()).unwrap();
        let offsets: Vec<usize> = config.offsets().into_iter().take(config.rebased_crops).collect();
        let layout = objective.layout(&offsets);
        let mut checked = check_against_graph(&layout, 0, &config.contract(config.latents).unwrap());
        let crop = config.contract(config.crop_latents()).unwrap();
        for n in 1..layout.sequences.len() {
            checked.extend(check_against_graph(&layout, n, &crop));
        }
        assert_eq!(checked.len(), layout.len(), "{config:?}: every frame is some forward's query");
        for q in 0..layout.len() {
            assert!(
                keys(&layout, q).iter().all(|&k| layout.frames[k].sequence == layout.frames[q].sequence),
                "frame {q} crosses sequences"
            );
            assert!(
                keys(&layout, q)
                    .iter()
                    .all(|&k| layout.frames[q].kind == layout.frames[k].kind || layout.frames[k].kind == FrameKind::Clean)
            );
        }
    }
}

#[test]
fn noised_copies_of_a_latent_share_noise_and_clean_copies_are_the_latent() {
    let config = small_config();
    let objective = SftObjective::new(config.clone()).unwrap();
    let (c, frames, h, w) = (3, 15, 2, 2);
    let values: Vec<f32> = (0..c * frames * h * w).map(|i| (i as f32 * 0.37).sin()).collect();
    let latents = TensorData::new(values.clone(), [c, frames, h, w]);
    let mut rng = TrainRng::new(5);
    let draw = Draw::sample(&config, &latents.shape, &mut rng);
    let layout = objective.layout(&draw.offsets);
    let device = Default::default();
    let packed = pack::<NdArray>(&latents, None, &draw, &layout, &device);
    let frame = |t: &Tensor<NdArray, 5>, f: usize| -> Vec<f32> { t.clone().narrow(2, f, 1).into_data().to_vec().unwrap() };
    let latent =
        |l: usize| -> Vec<f32> { (0..c).flat_map(|ch| values[(ch * frames + draw.start + l) * h * w..][..h * w].to_vec()).collect() };
    let mut by_latent: Vec<Option<(Vec<f32>, Vec<f32>)>> = vec![None; config.latents];
    for (f, pf) in layout.frames.iter().enumerate() {
        let (x, v, x0) = (frame(&packed.inputs, f), frame(&packed.targets, f), latent(pf.latent));
        if !pf.is_noised() {
            assert_eq!(x, x0, "clean copy {f} is the latent");
            continue;
        }
        for i in 0..x.len() {
            assert!((x[i] - x0[i] - draw.sigma as f32 * v[i]).abs() < 1e-5, "x_σ = x0 + σ(ε − x0) at frame {f}");
        }
        match &by_latent[pf.latent] {
            Some((x1, v1)) => assert!(x1 == &x && v1 == &v, "copies of latent {} differ", pf.latent),
            None => by_latent[pf.latent] = Some((x, v)),
        }
    }
    let t = 1000.0 * draw.sigma;
    assert!(layout.frames.iter().zip(&packed.timesteps).all(|(f, &ts)| ts == if f.is_noised() { t } else { 0.0 }));
}

#[test]
fn draws_are_distinct_offsets_and_reproducible() {
    let config = SftConfig::new();
    let mut a = TrainRng::new(11);
    let mut seen_sigma = Vec::new();
    for _ in 0..50 {
        let d = Draw::sample(&config, &[2, 90, 1, 1], &mut a);
        assert!(d.start <= 9 && d.offsets.len() == 4 && d.offsets.windows(2).all(|w| w[0] < w[1]));
        assert!(d.offsets.iter().all(|o| (1..=9).contains(o)));
        assert!(d.sigma > 0.0 && d.sigma <= 1.0 && d.noise.shape.to_vec() == vec![2, 81, 1, 1]);
        seen_sigma.push(d.sigma);
    }
    let mean = seen_sigma.iter().sum::<f64>() / 50.0;
    assert!(mean > 0.6, "shift 5 pushes σ up (mean of the table ≈ 0.77), got {mean}");
    let (d1, d2) =
        (Draw::sample(&config, &[2, 81, 1, 1], &mut TrainRng::new(3)), Draw::sample(&config, &[2, 81, 1, 1], &mut TrainRng::new(3)));
    assert_eq!((d1.offsets, d1.sigma, d1.noise), (d2.offsets, d2.sigma, d2.noise));
}

#[test]
fn bad_configs_are_named_errors() {
    let message = |c: SftConfig| match SftObjective::new(c) {
        Err(TrainError::Config(m)) => m,
        other => panic!("expected a config error, got {other:?}"),
    };
    assert!(message(SftConfig::new().with_rebase_offsets(Some(vec![0, 1, 2, 3]))).contains("rebase offset 0"));
    assert!(message(SftConfig::new().with_rebase_offsets(Some(vec![1, 2, 11, 3]))).contains("rebase offset 11"));
    assert!(message(SftConfig::new().with_rebase_offsets(Some(vec![1, 2, 3]))).contains("4 rebased crops"));
    assert!(message(SftConfig::new().with_latents(10)).contains("empty"));
    let chunk = message(SftConfig::new().with_chunk(0));
    assert!(chunk.contains("chunk") && !chunk.contains("--"), "{chunk}");
    assert!(message(SftConfig::new().with_timestep_shift(0.0)).contains("timestep_shift"));
    assert!(SftObjective::new(SftConfig::new().with_latents(10).with_rebased_crops(0)).is_ok());
}

#[test]
fn config_round_trips_through_serde_and_names_missing_keys() {
    let c = SftConfig::new().with_latents(141).with_rebase_offsets(Some(vec![2, 5, 7, 8]));
    let back: SftConfig = serde_json::from_str(&serde_json::to_string(&c).unwrap()).unwrap();
    assert_eq!(back, c);
    let err = serde_json::from_str::<SftConfig>(r#"{"latents": 81}"#).unwrap_err().to_string();
    assert!(err.contains("missing field"), "{err}");
}
