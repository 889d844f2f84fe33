//! Staging of `count ≤ slots × rows` consecutive elements of a tensor into shared memory (cast to
//! f32, times `factor`): unit `u` of a cube of `rows` units copies elements `u, u + rows, …`.
//!
//! Loop budget. Mesa's lavapipe (llvmpipe) counts the back-edges of *all* loops of an invocation
//! against one limit of 65,535 (`LP_MAX_TGSI_LOOP_ITERATIONS`) and from then on leaves every loop
//! after one iteration. So the kernels unroll, at compile time, the head-dim loops that run per
//! visited token (dot products, accumulator updates) and this copy (`slots` guarded steps), and
//! keep runtime loops per visited token (at most two), per staged block, per range, and the
//! once-per-row loads and stores over the head dim: a row can walk about 30,000 tokens on
//! lavapipe. GPUs have no such limit.

use cubecl::prelude::*;

#[cube]
pub fn stage_rows<F: Float>(
    src: &Tensor<F>,
    start: usize,
    count: usize,
    factor: f32,
    dst: &mut SharedMemory<f32>,
    #[comptime] slots: usize,
    #[comptime] rows: usize,
) {
    let unit = UNIT_POS_X as usize;
    #[unroll]
    for t in 0..slots {
        let i = t * rows + unit;
        if i < count {
            dst[i] = f32::cast_from(src[start + i]) * factor;
        }
    }
}
