//! Index arithmetic of the anchor set, blocks/chunks and anchor windows (see the module above).

use std::ops::Range;

/// `P(L, Δ) = {mΔ : mΔ < L} ∪ {L − 1}`, ascending.
pub(super) fn anchor_set(latents: usize, stride: usize) -> Vec<usize> {
    let mut p: Vec<usize> = (0..latents).step_by(stride).collect();
    if p.last() != Some(&(latents - 1)) {
        p.push(latents - 1);
    }
    p
}

/// Consecutive ranges of `size` over `0..n`; the last one is shorter when `size ∤ n`.
pub(super) fn split(n: usize, size: usize) -> Vec<Range<usize>> {
    (0..n).step_by(size).map(|s| s..(s + size).min(n)).collect()
}

/// Windows of `size` consecutive anchor indices sharing endpoints; see the contract docs.
pub(super) fn windows(anchors: usize, size: usize) -> Vec<Range<usize>> {
    if anchors < size {
        return std::iter::once(0..anchors).collect();
    }
    let step = (size - 1).max(1);
    let mut w: Vec<Range<usize>> = (0..).map(|j| step * j..step * j + size).take_while(|r| r.end <= anchors).collect();
    if w.last().is_some_and(|r| r.end < anchors) {
        w.push(anchors - size..anchors);
    }
    w
}

/// The first window whose last anchor position is at or after `last_position`.
pub(super) fn window_of(anchors: &[usize], windows: &[Range<usize>], last_position: usize) -> usize {
    windows
        .iter()
        .position(|w| anchors[w.end - 1] >= last_position)
        .expect("the last anchor is L − 1, so the last window covers every position")
}
