//! Frame rules of the paper's packed SFT sequence (ARCHITECTURE §10.1, paper Alg. 2), as the kernel tests
//! and `bench attention` use them: for each query frame, the sorted key frames it may see.
//!
//! Frame order: clean anchor copies `P⁰`, noised anchors `P^σ`, renderer latents `I^σ`, then the
//! time-rebased crops (each its noised planner targets followed by its clean copies). Anchors
//! every [`STRIDE`] latents plus the last, planner blocks and renderer chunks of [`CHUNK`],
//! renderer history [`HISTORY`] chunks, anchor windows of 3 anchors that share endpoints.
//! At `latents = 81` this is the paper's 155-frame layout (9 + 9 + 81 + 4 × (8 + 6)).

use crate::BlockTable;
use std::ops::Range;

/// Anchor stride Δ in latents (the paper's default).
pub const STRIDE: usize = 10;
/// Planner block B_P (anchors) and renderer chunk B_R (latents).
pub const CHUNK: usize = 3;
/// Renderer history H in chunks.
pub const HISTORY: usize = 5;
/// Latent offsets of the time-rebased crops; each crop drops `STRIDE` latents.
pub const CROP_OFFSETS: [usize; 4] = [1, 3, 5, 7];

/// Anchor latents `{mΔ < latents} ∪ {latents − 1}`.
fn anchor_latents(latents: usize) -> Vec<usize> {
    let mut a: Vec<usize> = (0..latents).step_by(STRIDE).collect();
    if latents > 0 && a.last() != Some(&(latents - 1)) {
        a.push(latents - 1);
    }
    a
}

/// Rules under construction: key frames per query frame.
struct Rules(Vec<Vec<usize>>);

impl Rules {
    fn allow(&mut self, queries: Range<usize>, keys: Range<usize>) {
        for q in queries {
            self.0[q].extend(keys.clone());
        }
    }

    /// Planner part at `offset`: `blocks` of anchor frames, the noised targets at `noised`, the
    /// clean copies (one per anchor of the blocks that have them) at `clean`. Noised block j sees
    /// itself and the clean copies of blocks before j; clean copies are block-causal.
    fn planner(&mut self, anchors: usize, noised: usize, clean: usize, clean_count: usize) {
        for start in (0..anchors).step_by(CHUNK) {
            let end = (start + CHUNK).min(anchors);
            self.allow(noised + start..noised + end, noised + start..noised + end);
            self.allow(noised + start..noised + end, clean..clean + start.min(clean_count));
            if start < clean_count {
                self.allow(clean + start..clean + end.min(clean_count), clean..clean + end.min(clean_count));
            }
        }
    }
}

/// Rules of the packed SFT sequence with `latents` renderer latents (`rules[q]` sorted).
///
/// ```
/// use kernels_cubecl::kernel::layouts::packed_sft;
///
/// let rules = packed_sft(81);
/// assert_eq!(rules.len(), 155); // 9 + 9 + 81 + 4 × (8 + 6) frames
/// // Renderer chunk 0 (frames 18..21) sees itself and the clean anchors 0, 10, 20.
/// assert_eq!(rules[18], vec![0, 1, 2, 18, 19, 20]);
/// ```
pub fn packed_sft(latents: usize) -> Vec<Vec<usize>> {
    let anchors = anchor_latents(latents);
    let na = anchors.len();
    let crop_len = latents.saturating_sub(STRIDE);
    let crop_anchors = anchor_latents(crop_len).len();
    // Crops keep clean copies of all planner blocks but the last.
    let crop_clean = crop_anchors.saturating_sub(1) / CHUNK * CHUNK;
    let crops = if crop_len > 0 { CROP_OFFSETS.len() } else { 0 };
    let total = 2 * na + latents + crops * (crop_anchors + crop_clean);
    let mut rules = Rules(vec![Vec::new(); total]);
    let (clean, noised, render) = (0, na, 2 * na);
    rules.planner(na, noised, clean, na);
    let windows = na.saturating_sub(1).div_ceil(2).max(1);
    for start in (0..latents).step_by(CHUNK) {
        let chunk = start / CHUNK;
        let end = (start + CHUNK).min(latents);
        let history = chunk.saturating_sub(HISTORY) * CHUNK;
        rules.allow(render + start..render + end, render + history..render + end);
        // Anchor window Γ(i): the last window whose first anchor is at or before the chunk.
        let w = (0..windows).rev().find(|w| anchors[2 * w] <= start).unwrap_or(0);
        rules.allow(render + start..render + end, clean + 2 * w..clean + (2 * w + 3).min(na));
    }
    for c in 0..crops {
        let base = render + latents + c * (crop_anchors + crop_clean);
        rules.planner(crop_anchors, base, base + crop_anchors, crop_clean);
    }
    rules
        .0
        .into_iter()
        .map(|mut r| {
            r.sort_unstable();
            r.dedup();
            r
        })
        .collect()
}

/// The packed SFT table with `tokens_per_frame` tokens in every frame.
pub fn packed_sft_table(latents: usize, tokens_per_frame: usize) -> BlockTable {
    let rules = packed_sft(latents);
    let tokens = vec![tokens_per_frame; rules.len()];
    BlockTable::from_rules(&tokens, &tokens, |q| rules[q].clone())
}

/// A renderer chunk of [`CHUNK`] frames over `context` frames (anchors + history) and itself.
pub fn chunk_table(context: usize, tokens_per_frame: usize) -> BlockTable {
    BlockTable::full(&[tokens_per_frame; CHUNK], &vec![tokens_per_frame; context + CHUNK])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paper_layout_has_155_frames_and_the_reads_of_alg2() {
        let rules = packed_sft(81);
        assert_eq!(rules.len(), 155);
        // Noised planner block 1 (frames 12..15) sees itself and clean block 0 (frames 0..3).
        assert_eq!(rules[12], vec![0, 1, 2, 12, 13, 14]);
        // Renderer chunk 0 (frames 18..21) sees itself and clean anchors 0, 10, 20.
        assert_eq!(rules[18], vec![0, 1, 2, 18, 19, 20]);
        // Renderer chunk 10 (latents 30..33) sees chunks 5..=10 and the anchor window {20, 30, 40}.
        let r = &rules[18 + 30];
        assert_eq!(r[..3], [2, 3, 4]);
        assert_eq!(r[3..], (18 + 15..18 + 33).collect::<Vec<_>>()[..]);
        // Crops: 8 noised + 6 clean each, isolated; the first crop's last block (2 frames) sees
        // itself and its 6 clean copies.
        assert_eq!(rules[99 + 6], vec![99 + 6, 99 + 7, 99 + 8, 99 + 9, 99 + 10, 99 + 11, 99 + 12, 99 + 13]);
        assert!(rules[99..113].iter().flatten().all(|k| (99..113).contains(k)));
    }
}
