use super::*;

fn contract(latents: usize) -> Contract {
    Contract::new(ContractConfig::new(latents)).unwrap()
}

fn positions(c: &Contract, r: Range<usize>) -> Vec<usize> {
    c.anchors[r].to_vec()
}

#[test]
fn anchor_sets_follow_the_paper() {
    assert_eq!(contract(81).anchors, (0..=80).step_by(10).collect::<Vec<_>>());
    assert_eq!(contract(21).anchors, vec![0, 10, 20]);
    assert_eq!(contract(25).anchors, vec![0, 10, 20, 24]);
    assert_eq!(contract(5).anchors, vec![0, 4]);
    assert_eq!(contract(1).anchors, vec![0]);
    assert_eq!(contract(261).anchors.len(), 27);
}

#[test]
fn blocks_and_chunks_at_81() {
    let c = contract(81);
    assert_eq!(c.num_blocks(), 3);
    assert_eq!(positions(&c, c.blocks[1].clone()), vec![30, 40, 50]);
    assert_eq!(c.num_chunks(), 27);
    assert_eq!(c.chunks[2], 6..9);
}

#[test]
fn last_chunk_and_block_are_shorter_when_sizes_do_not_divide() {
    let c = contract(22);
    assert_eq!(c.num_chunks(), 8);
    assert_eq!(c.chunks[7], 21..22);
    // anchors {0,10,20,21}: blocks of 3 then 1
    assert_eq!(c.blocks, vec![0..3, 3..4]);
}

#[test]
fn windows_share_endpoints_and_bracket_chunks() {
    let c = contract(81);
    let w: Vec<Vec<usize>> = c.windows.iter().map(|r| positions(&c, r.clone())).collect();
    assert_eq!(w, vec![vec![0, 10, 20], vec![20, 30, 40], vec![40, 50, 60], vec![60, 70, 80]]);
    assert_eq!(positions(&c, c.window(2)), vec![0, 10, 20]); // chunk 6-8 (paper Fig. 2)
    let per_window: Vec<usize> = (0..4).map(|w| c.chunk_window.iter().filter(|&&x| x == w).count()).collect();
    assert_eq!(per_window, vec![7, 6, 7, 7]);
}

#[test]
fn every_chunk_has_a_three_anchor_window_reaching_past_it() {
    for latents in 1..300 {
        let c = contract(latents);
        for (i, ch) in c.chunks.iter().enumerate() {
            let w = c.window(i);
            assert_eq!(w.len(), c.anchors.len().min(3), "L={latents} chunk {i}");
            assert!(c.anchors[w.end - 1] >= ch.end - 1, "L={latents} chunk {i}");
        }
        let covered: usize = c.chunks.iter().map(|r| r.len()).sum();
        assert_eq!(covered, latents);
    }
}

#[test]
fn even_anchor_count_ends_with_the_last_three() {
    let c = contract(25);
    assert_eq!(positions(&c, c.windows[1].clone()), vec![10, 20, 24]);
    assert_eq!(positions(&c, c.window(7)), vec![10, 20, 24]); // chunk 21-23
}

#[test]
fn default_stage_timesteps() {
    let c = contract(21);
    assert_eq!(c.timesteps, vec![999.0, 937.0, 833.0, 624.0]);
    assert_eq!(c.sigma(4), 0.0);
    assert!((c.sigma(1) - 0.937).abs() < 1e-12);
}

#[test]
fn tails_and_planner_context_are_bounded() {
    let c = contract(261);
    assert_eq!(c.tail(2, 5), 0..2);
    assert_eq!(c.tail(40, 5), 35..40);
    assert_eq!(c.planner_context(8), 6..24); // 18 anchors
    assert_eq!(c.baseline_history(), 6);
}

#[test]
fn bad_configurations_are_rejected() {
    let err = Contract::new(ContractConfig::new(0)).unwrap_err();
    assert!(err.to_string().contains("latents L"), "{err}");
    assert!(!err.to_string().contains("--"), "library errors name no command-line flags: {err}");
    let err = Contract::new(ContractConfig::new(81).with_history(6)).unwrap_err();
    assert!(err.to_string().contains("W_ctx"), "{err}");
}

#[test]
fn window_size_is_a_parameter() {
    // Γ of 2 anchors: every pair of neighbouring anchors, each chunk bracketed by the next anchor
    let c = Contract::new(ContractConfig::new(41).with_anchor_window(2)).unwrap();
    let w: Vec<Vec<usize>> = c.windows.iter().map(|r| positions(&c, r.clone())).collect();
    assert_eq!(w, vec![vec![0, 10], vec![10, 20], vec![20, 30], vec![30, 40]]);
    assert_eq!(positions(&c, c.window(4)), vec![10, 20]); // chunk 12-14
    // Γ of 4 anchors share endpoints every 3 anchors; the last window ends on the last anchor
    let c = Contract::new(ContractConfig::new(81).with_anchor_window(4).with_history(4)).unwrap();
    let w: Vec<Vec<usize>> = c.windows.iter().map(|r| positions(&c, r.clone())).collect();
    assert_eq!(w, vec![vec![0, 10, 20, 30], vec![30, 40, 50, 60], vec![50, 60, 70, 80]]);
    // the context budget counts the window
    let err = Contract::new(ContractConfig::new(81).with_anchor_window(4)).unwrap_err();
    assert!(err.to_string().contains("4 anchors"), "{err}");
}

#[test]
fn the_euler_planner_has_its_own_shifted_grid() {
    let distilled = contract(21);
    assert_eq!((distilled.planner_levels(), distilled.planner_timesteps.clone()), (4, distilled.timesteps.clone()));
    assert!(!distilled.planner_euler() && !distilled.planner_guided());
    let c = Contract::new(ContractConfig::new(21).with_planner_steps(4).with_planner_guidance(5.0)).unwrap();
    assert!(c.planner_euler() && c.planner_guided());
    assert_eq!(c.planner_levels(), 4);
    // σ_l = shift·s / (1 + (shift − 1)·s) at s = 1 − l/4, shift 5: 1, 15/16, 5/6, 5/8, then 0
    for (l, want) in [1.0, 15.0 / 16.0, 5.0 / 6.0, 5.0 / 8.0, 0.0].into_iter().enumerate() {
        assert!((c.planner_sigma(l) - want).abs() < 1e-9, "level {l}: {} vs {want}", c.planner_sigma(l));
    }
    assert_eq!(c.timesteps, distilled.timesteps, "the renderer's stages are unchanged");
    let unguided = Contract::new(ContractConfig::new(21).with_planner_steps(7)).unwrap();
    assert!(unguided.planner_euler() && !unguided.planner_guided());
}

#[test]
fn planner_guidance_needs_euler_steps() {
    let err = Contract::new(ContractConfig::new(21).with_planner_guidance(5.0)).unwrap_err();
    assert!(err.to_string().contains("planner steps > 0"), "{err}");
    let err = Contract::new(ContractConfig::new(21).with_planner_steps(1001)).unwrap_err();
    assert!(err.to_string().contains("1000-step table"), "{err}");
    let err = Contract::new(ContractConfig::new(21).with_planner_steps(3).with_planner_guidance(f64::NAN)).unwrap_err();
    assert!(err.to_string().contains("planner guidance"), "{err}");
}
