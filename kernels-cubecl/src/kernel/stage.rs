//! Staging of `count ≤ slots × rows` consecutive elements of a tensor into shared memory (cast to
//! f32, times `factor`): unit `u` of a cube of `rows` units copies elements `u, u + rows, …`.
//!
//! The copy loop is unrolled at compile time (`slots` steps, guarded by `count`) like every loop
//! of the kernels whose trip count the host knows: Mesa's lavapipe (llvmpipe) stops *every* loop
//! of an invocation after 65,535 back-edges in total (`LP_MAX_TGSI_LOOP_ITERATIONS`, shared by
//! all loops of a shader), so the kernels keep their runtime loops to one iteration per staged
//! block and per key/query range.

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
