//! Per-frame description of one forward: each latent frame's absolute position (the RoPE
//! temporal index) and role; and, for packed sequences, the frame-level attention rules.

use crate::lora::Role;
use burn::tensor::{Bool, Tensor, TensorData, backend::Backend};

/// Positions and roles of the latent frames of one forward (shared by the batch).
#[derive(Clone, Debug, PartialEq)]
pub struct FrameLayout {
    pub positions: Vec<usize>,
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

    pub fn len(&self) -> usize {
        self.positions.len()
    }

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

    pub fn is_allowed(&self, query: usize, key: usize) -> bool {
        self.allowed[query][key]
    }

    /// Token-level boolean mask `[1, 1, tokens, tokens]`, true = masked out.
    pub fn to_tokens<B: Backend>(&self, tokens_per_frame: usize, device: &B::Device) -> Tensor<B, 4, Bool> {
        let n = self.frames() * tokens_per_frame;
        let mut m = Vec::with_capacity(n * n);
        for q in 0..n {
            let row = &self.allowed[q / tokens_per_frame];
            m.extend((0..n).map(|k| !row[k / tokens_per_frame]));
        }
        Tensor::from_data(TensorData::new(m, [1, 1, n, n]), device)
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
}
