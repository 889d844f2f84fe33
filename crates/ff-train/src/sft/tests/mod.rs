//! Tests of the Phase 1 objective on `NdArray` / `Autodiff<NdArray>` with tiny shapes.

mod layout;
mod precision;
mod sharded;
mod train;

use super::SftConfig;
use crate::TrainRng;
use crate::data::LatentClip;

/// A small layout with every feature: 4 anchors in blocks of 2, chunks of 2 with H = 2, two crops
/// of 8 latents (anchors {0, 4, 7}: blocks 2 + 1, so the crop's last block has no clean copy).
fn small_config() -> SftConfig {
    SftConfig::new().with_latents(12).with_anchor_stride(4).with_planner_block(2).with_chunk(2).with_history(2).with_rebased_crops(2)
}

/// A random clip of `frames` latents of 4×4 (16 channels) with a 5-token prompt of width 24.
fn clip(frames: usize, seed: u64) -> LatentClip {
    let mut rng = TrainRng::new(seed);
    LatentClip {
        latents: rng.normal_data(vec![16, frames, 4, 4]),
        prompt: rng.normal_data(vec![5, 24]),
        crops: None,
        caption: format!("clip {seed}"),
    }
}
