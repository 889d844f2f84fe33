use super::*;
use crate::render::{frames_for_seconds, render};
use crate::scene::{Scene, SceneConfig};

fn five_seconds(scene: &Scene) -> Clip {
    render(scene, frames_for_seconds(5))
}

#[test]
fn generator_clips_score_perfectly_against_their_captions() {
    let config = SceneConfig { gradient: 0.5, ..Default::default() };
    for seed in 0..40 {
        let scene = Scene::sample(seed, &config);
        let r = evaluate(&five_seconds(&scene), &scene.prompt, &EvalOptions::default()).unwrap();
        assert_eq!(r.prompt_accuracy, 1.0, "seed {seed} '{}': {:?}", scene.caption(), r.tracks);
        assert_eq!(r.identity_persistence, 1.0, "seed {seed}");
        // Fastest motion: 18 px/s on both axes, 1.59 px per frame.
        assert!(r.max_jump < 1.7, "seed {seed}: {}", r.max_jump);
    }
}

#[test]
fn a_wrong_prompt_scores_by_what_it_gets_wrong() {
    let scene = Scene::from_prompt(Prompt::parse("a red circle moves right on a black background").unwrap(), 1, 64, 64);
    let clip = five_seconds(&scene);
    let score = |p: &str| evaluate(&clip, &Prompt::parse(p).unwrap(), &EvalOptions::default()).unwrap().prompt_accuracy;
    assert_eq!(score("a blue square moves up on a black background"), 0.0);
    assert!((score("a red square moves right on a black background") - 2.0 / 3.0).abs() < 1e-9);
    assert!((score("a red circle moves left on a black background") - 2.0 / 3.0).abs() < 1e-9);
}

/// A video drawn by other code (hard-edged square, no anti-aliasing, other colours and speed).
#[test]
fn works_on_a_square_drawn_by_another_tool() {
    let (w, h) = (96, 80);
    let frames = (0..81)
        .map(|f| {
            let mut rgb = vec![0u8; 3 * w * h];
            let x0 = 10 + f / 2;
            for y in 30..46 {
                for x in x0..x0 + 16 {
                    rgb[3 * (y * w + x)..3 * (y * w + x) + 3].copy_from_slice(&[30, 180, 70]);
                }
            }
            rgb
        })
        .collect();
    let clip = Clip { width: w, height: h, frames };
    let r = evaluate(&clip, &Prompt::parse("a green square moves right on a black background").unwrap(), &EvalOptions::default()).unwrap();
    assert_eq!((r.prompt_accuracy, r.identity_persistence), (1.0, 1.0), "{:?}", r.tracks);
}

#[test]
fn identity_persistence_counts_lost_and_duplicated_objects() {
    let scene = Scene::from_prompt(Prompt::parse("a yellow triangle bounces on a gray background").unwrap(), 3, 64, 64);
    let mut clip = five_seconds(&scene);
    let blank = render(&Scene { objects: vec![], ..scene.clone() }, 1).frames.remove(0);
    for f in 10..20 {
        clip.frames[f] = blank.clone();
    }
    let options = EvalOptions { window_seconds: 2.5, ..EvalOptions::default() };
    let r = evaluate(&clip, &scene.prompt, &options).unwrap();
    assert!((r.identity_persistence - 71.0 / 81.0).abs() < 1e-9, "{}", r.identity_persistence);
    assert_eq!(r.identity_failures, IdentityFailures { lost: 10.0 / 81.0, ..Default::default() });
    let starts: Vec<f64> = r.drift.iter().map(|w| w.start_seconds).collect();
    assert_eq!(starts, [0.0, 2.5], "two 40-frame windows, the 81st frame in the second");
    assert!(r.drift[0].identity_persistence < 1.0 && r.drift[1].identity_persistence == 1.0);
    assert!((r.drift[0].identity_persistence - 30.0 / 40.0).abs() < 1e-9);
}

/// Frames of the same colour in another shape, of another colour, and with a second object each
/// break the identity for their own reason. Seed 2 places the second object apart from the first
/// in the frames it is spliced into (with an overlap the two would be detected as one).
#[test]
fn identity_failures_say_what_changed() {
    let frames_of = |p: &str| five_seconds(&Scene::from_prompt(Prompt::parse(p).unwrap(), 2, 64, 64)).frames;
    let prompt = Prompt::parse("a yellow triangle bounces on a gray background").unwrap();
    let mut clip = five_seconds(&Scene::from_prompt(prompt.clone(), 2, 64, 64));
    let (square, red) =
        (frames_of("a yellow square bounces on a gray background"), frames_of("a red triangle bounces on a gray background"));
    let two = frames_of("a yellow triangle bounces and a blue circle moves up on a gray background");
    clip.frames[10..16].clone_from_slice(&square[10..16]);
    clip.frames[20..23].clone_from_slice(&red[20..23]);
    clip.frames[30..32].clone_from_slice(&two[30..32]);
    let r = evaluate(&clip, &prompt, &EvalOptions::default()).unwrap();
    let expected = IdentityFailures { lost: 0.0, extra: 2.0 / 81.0, shape: 6.0 / 81.0, colour: 3.0 / 81.0 };
    assert_eq!(r.identity_failures, expected);
    assert!((r.identity_persistence - 70.0 / 81.0).abs() < 1e-9, "{}", r.identity_persistence);
}

#[test]
fn a_trailing_frame_joins_the_last_drift_window() {
    assert_eq!(windows(81, 80).collect::<Vec<_>>(), [(0, 81)]);
    assert_eq!(windows(1041, 80).collect::<Vec<_>>().last(), Some(&(960, 1041)));
    assert_eq!(windows(1041, 80).count(), 13);
    assert_eq!(windows(120, 80).collect::<Vec<_>>(), [(0, 80), (80, 120)], "half a window stands alone");
    assert_eq!(windows(0, 80).count(), 0);
}

/// Luminance offsets injected at anchor latents or alternating per chunk show up as the matching
/// seam statistic and nowhere else; one alternating per latent (a codec's boundary jump) shows up
/// at every latent boundary alike, anchor, chunk and the interior's latent boundaries.
#[test]
fn seams_find_injected_anchor_and_chunk_offsets() {
    let (w, h, latents) = (16, 16, 41);
    let layout = SeamLayout::default();
    let frames = 1 + 4 * (latents - 1);
    let video = |offset: &dyn Fn(usize) -> u8| Clip {
        width: w,
        height: h,
        frames: (0..frames).map(|f| vec![100 + offset(layout.latent(f)); 3 * w * h]).collect(),
    };
    let anchors = measure(&video(&|l| if l % 10 == 0 || l == latents - 1 { 12 } else { 0 }), &layout);
    assert!((anchors.anchor - 12.0).abs() < 0.01 && anchors.chunk == 0.0 && anchors.interior == 0.0, "{anchors:?}");
    assert_eq!(anchors.latent_boundary, 0.0);
    assert!((anchors.periodic - 24.0).abs() < 0.01, "{}", anchors.periodic);
    let chunks = measure(&video(&|l| if (l / 3) % 2 == 1 { 8 } else { 0 }), &SeamLayout { anchor_stride: 0, ..layout.clone() });
    assert!((chunks.chunk - 8.0).abs() < 0.01 && chunks.interior == 0.0 && chunks.anchor == 0.0, "{chunks:?}");
    assert_eq!(chunks.latent_boundary, 0.0);
    let codec = measure(&video(&|l| if l % 2 == 1 { 6 } else { 0 }), &layout);
    assert!([codec.anchor, codec.chunk, codec.latent_boundary].iter().all(|j| (j - 6.0).abs() < 0.01), "{codec:?}");
    assert!(codec.interior > 0.0 && codec.interior < 6.0 * 0.3, "three of four interior transitions lie inside a latent: {codec:?}");
}

use seams::measure;
