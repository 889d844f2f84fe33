//! `generate --splice`: the paper's splice baseline (Sec. B, Tab. 6 (a), first variant), an
//! ablation. The planner's clean anchor latents, whose K/V the renderer already reads, replace
//! the renderer's output at the anchor positions, so the video switches between the two roles'
//! outputs there. FlashForward itself keeps every renderer output and uses the anchors only as
//! conditioning.
//!
//! [`Splice`] sits between the workers and [`super::stream::InOrder`]: anchor blocks arrive as
//! [`Finished`] with `planner` set (the source of each block's clean-endpoint forward, streamed
//! by [`super::stream::Streamed`]), output chunks as usual; a chunk goes on once the anchors of
//! all its anchor positions are in (a chunk's window reads them, so they come first on every
//! executor; waiting makes it hold anyway).

use std::collections::BTreeMap;

use burn::prelude::Backend;
use burn::tensor::Tensor;

use super::stream::Finished;

/// Anchor latents by position and chunks waiting for theirs. Latents are `[1, C, F, H, W]`.
pub struct Splice<B: Backend> {
    /// Anchor positions of the contract.
    positions: Vec<usize>,
    anchors: BTreeMap<usize, Tensor<B, 5>>,
    waiting: Vec<Finished<Tensor<B, 5>>>,
}

impl<B: Backend> Splice<B> {
    /// A splice over the contract's anchor positions.
    pub fn new(positions: &[usize]) -> Self {
        Self { positions: positions.to_vec(), anchors: BTreeMap::new(), waiting: Vec::new() }
    }

    /// Takes one message from the workers and returns the output chunks that can go on, spliced.
    pub fn push(&mut self, done: Finished<Tensor<B, 5>>) -> Vec<Finished<Tensor<B, 5>>> {
        if done.planner {
            for (i, &p) in done.positions.iter().enumerate() {
                self.anchors.insert(p, frame(&done.latent, i));
            }
        } else {
            self.waiting.push(done);
        }
        let (ready, waiting) = std::mem::take(&mut self.waiting).into_iter().partition(|d| self.has_anchors(d));
        self.waiting = waiting;
        ready.into_iter().map(|d| self.splice(d)).collect()
    }

    fn has_anchors(&self, done: &Finished<Tensor<B, 5>>) -> bool {
        done.positions.iter().filter(|p| self.positions.contains(p)).all(|p| self.anchors.contains_key(p))
    }

    fn splice(&self, mut done: Finished<Tensor<B, 5>>) -> Finished<Tensor<B, 5>> {
        for (i, p) in done.positions.iter().enumerate() {
            if let Some(anchor) = self.anchors.get(p) {
                let [b, c, _, h, w] = done.latent.dims();
                let anchor = anchor.clone().to_device(&done.latent.device());
                done.latent = done.latent.slice_assign([0..b, 0..c, i..i + 1, 0..h, 0..w], anchor);
            }
        }
        done
    }
}

/// Frame `i` of `[1, C, F, H, W]`.
fn frame<B: Backend>(latent: &Tensor<B, 5>, i: usize) -> Tensor<B, 5> {
    let [b, c, _, h, w] = latent.dims();
    latent.clone().slice([0..b, 0..c, i..i + 1, 0..h, 0..w])
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::NdArray;

    type B = NdArray<f32>;

    /// `[1, 1, positions, 1, 1]` holding `value + position` at each position.
    fn finished(positions: std::ops::Range<usize>, value: f32, planner: bool) -> Finished<Tensor<B, 5>> {
        let data: Vec<f32> = positions.clone().map(|p| value + p as f32).collect();
        let n = data.len();
        let latent = Tensor::<B, 1>::from_floats(data.as_slice(), &Default::default()).reshape([1, 1, n, 1, 1]);
        Finished { positions: positions.collect(), latent, planner }
    }

    fn values(done: &Finished<Tensor<B, 5>>) -> Vec<f32> {
        done.latent.clone().into_data().to_vec().unwrap()
    }

    #[test]
    fn anchor_latents_replace_the_renderer_output_at_anchor_positions_only() {
        let mut splice = Splice::<B>::new(&[0, 4]);
        assert!(splice.push(finished(3..6, 100.0, false)).is_empty(), "chunk 3..6 waits for anchor 4");
        // a planner block of anchors 0 and 4, latents in position order
        let mut anchors = finished(0..2, 0.0, true);
        anchors.positions = vec![0, 4];
        let ready = splice.push(anchors);
        assert_eq!(ready.len(), 1);
        assert_eq!(ready[0].positions, [3, 4, 5]);
        assert_eq!(values(&ready[0]), [103.0, 1.0, 105.0], "position 4 holds the block's second anchor");
        let first = splice.push(finished(0..3, 100.0, false));
        assert_eq!(values(&first[0]), [0.0, 101.0, 102.0]);
        let plain = splice.push(finished(6..9, 100.0, false));
        assert_eq!(values(&plain[0]), [106.0, 107.0, 108.0], "no anchor, untouched");
    }
}
