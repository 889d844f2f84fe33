//! Tests of the Phase 1 objective on `NdArray` / `Autodiff<NdArray>` with tiny shapes.

mod layout;
mod precision;
mod sharded;
mod train;

use super::SftConfig;

/// A small layout with every feature: 4 anchors in blocks of 2, chunks of 2 with H = 2, two crops
/// of 8 latents (anchors {0, 4, 7}: blocks 2 + 1, so the crop's last block has no clean copy).
fn small_config() -> SftConfig {
    SftConfig::new().with_latents(12).with_anchor_stride(4).with_planner_block(2).with_chunk(2).with_history(2).with_rebased_crops(2)
}
