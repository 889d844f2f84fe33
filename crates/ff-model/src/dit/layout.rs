//! Per-frame description of one forward: each latent frame's absolute position (the RoPE
//! temporal index) and role; and, for packed sequences, the frame-level attention rules, which
//! become a [`BlockTable`] (never a token-level mask).

use crate::lora::Role;
use kernels_cubecl::BlockTable;

/// Positions and roles of the latent frames of one forward (shared by the batch).
#[derive(Clone, Debug, PartialEq)]
pub struct FrameLayout {
    /// Absolute latent position of each frame (the RoPE temporal index).
    pub positions: Vec<usize>,
    /// Role of each frame.
    pub roles: Vec<Role>,
}

impl FrameLayout {
    /// `frames` consecutive latents starting at `start`, all playing `role`.
    pub fn chunk(start: usize, frames: usize, role: Role) -> Self {
        Self::frames((start..start + frames).collect(), role)
    }

    /// Frames at arbitrary positions (e.g. anchors 0, 10, 20), all playing `role`.
    pub fn frames(positions: Vec<usize>, role: Role) -> Self {
        let roles = vec![role; positions.len()];
        Self { positions, roles }
    }

    /// Latent frames in the forward.
    pub fn len(&self) -> usize {
        self.positions.len()
    }

    /// Whether the layout has no frame.
    pub fn is_empty(&self) -> bool {
        self.positions.is_empty()
    }
}

/// Frame-level attention rules of a packed sequence: `allowed[q][k]` says whether the tokens of
/// frame `q` may attend to those of frame `k` (every token of a frame shares its frame's rules).
#[derive(Clone, Debug, PartialEq)]
pub struct SegmentMask {
    allowed: Vec<Vec<bool>>,
}

impl SegmentMask {
    /// `frames` frames, nothing allowed yet.
    pub fn new(frames: usize) -> Self {
        Self { allowed: vec![vec![false; frames]; frames] }
    }

    /// Frames of the sequence.
    pub fn frames(&self) -> usize {
        self.allowed.len()
    }

    /// Lets every query frame in `queries` attend to every key frame in `keys`.
    pub fn allow(mut self, queries: impl IntoIterator<Item = usize> + Clone, keys: impl IntoIterator<Item = usize> + Clone) -> Self {
        for q in queries {
            for k in keys.clone() {
                self.allowed[q][k] = true;
            }
        }
        self
    }

    /// Block-causal over consecutive blocks of `block` frames: each block attends to itself and
    /// every earlier block.
    pub fn block_causal(frames: usize, block: usize) -> Self {
        (0..frames.div_ceil(block)).fold(Self::new(frames), |m, j| {
            let q = j * block..((j + 1) * block).min(frames);
            m.allow(q, 0..((j + 1) * block).min(frames))
        })
    }

    /// Whether frame `query` may attend to frame `key`.
    pub fn is_allowed(&self, query: usize, key: usize) -> bool {
        self.allowed[query][key]
    }

    /// The rules as a block table over frames of `tokens_per_frame` tokens (O(frames²)).
    pub fn block_table(&self, tokens_per_frame: usize) -> BlockTable {
        let sizes = vec![tokens_per_frame; self.frames()];
        BlockTable::from_rules(&sizes, &sizes, |q| (0..self.frames()).filter(move |&k| self.allowed[q][k]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_causal_rules() {
        let m = SegmentMask::block_causal(7, 3);
        assert!(m.is_allowed(0, 2) && m.is_allowed(2, 0));
        assert!(!m.is_allowed(2, 3));
        assert!(m.is_allowed(5, 0) && m.is_allowed(5, 5) && !m.is_allowed(5, 6));
        assert!(m.is_allowed(6, 6) && m.is_allowed(6, 0));
    }

    #[test]
    fn block_table_keeps_the_frame_rules() {
        let m = SegmentMask::new(5).allow(0..2, 0..2).allow(2..4, [0, 2, 3]).allow(4..5, 0..5);
        let table = m.block_table(3);
        assert_eq!(table.tokens(), (15, 15));
        assert_eq!(table.groups().len(), 3);
        for q in 0..5 {
            for k in 0..5 {
                assert_eq!(table.is_allowed(q, k), m.is_allowed(q, k), "({q}, {k})");
            }
        }
        assert_eq!(table.group_key_tokens(&table.groups()[1]), vec![0..3, 6..12]);
    }
}
