//! Tensor-core (`cmma`, 16×16×16, f32 accumulators) helpers of the attention kernels: every
//! product of the `cmma` path is a sum of fragment products over shared-memory tiles
//! ([`mma_sum`]), for one plane (16 rows) at a time. Only runtimes with the shape compile them
//! ([`super::tiles::has_cmma`]: CUDA f16/bf16).

use super::tiles::GROUP_ROWS;
use cubecl::prelude::*;

/// How a shared-memory tile is read as a 16×16 `cmma` operand: its leading dimension, the offset
/// from one fragment of the sum to the next, and whether it is read column-major.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Operand {
    pub ld: usize,
    pub step: usize,
    pub col_major: bool,
}

/// The 16×16 fragment of `s` at `start` as operand `ident`.
#[cube]
fn fragment<F: Float>(s: &SharedMemory<F>, start: usize, #[comptime] ident: cmma::MatrixIdent, #[comptime] op: Operand) -> cmma::Matrix<F> {
    let layout = comptime!(if op.col_major { cmma::MatrixLayout::ColMajor } else { cmma::MatrixLayout::RowMajor });
    cmma::Matrix::<F>::from_slice(ident, 16usize, 16usize, 16usize, layout, &s.slice(start, start + 15 * op.ld + 16), op.ld as u32)
}

/// A 16×16 f32 accumulator: zero, or loaded from the row-major `[.., ld]` f32 tile `from` at
/// `start` when `load`.
#[cube]
pub fn accumulator(from: &SharedMemory<f32>, start: usize, #[comptime] ld: usize, #[comptime] load: bool) -> cmma::Matrix<f32> {
    let acc =
        cmma::Matrix::<f32>::from_value(cmma::MatrixIdent::Accumulator, 16usize, 16usize, 16usize, cmma::MatrixLayout::Undefined, 0.0);
    if comptime!(load) {
        cmma::load_with_layout(&acc, &from.slice(start, start + 15 * ld + 16), ld as u32, cmma::MatrixLayout::RowMajor);
    }
    acc
}

/// `acc += Σ_s A_s · B_s` over `steps` fragments: `A_s` of `a` at `a_start + s · a_op.step`,
/// `B_s` of `b` at `b_start + s · b_op.step`.
#[cube]
#[allow(clippy::too_many_arguments)]
pub fn mma_sum<F: Float>(
    acc: &cmma::Matrix<f32>,
    a: &SharedMemory<F>,
    a_start: usize,
    #[comptime] a_op: Operand,
    b: &SharedMemory<F>,
    b_start: usize,
    #[comptime] b_op: Operand,
    #[comptime] steps: usize,
) {
    #[unroll]
    for s in 0..steps {
        let am = fragment::<F>(a, a_start + s * a_op.step, cmma::MatrixIdent::A, a_op);
        let bm = fragment::<F>(b, b_start + s * b_op.step, cmma::MatrixIdent::B, b_op);
        cmma::execute::<F, F, f32, f32>(&am, &bm, acc, acc);
    }
}

/// Stores `acc` into the row-major `[.., ld]` f32 tile `dst` at `start`.
#[cube]
pub fn store(acc: &cmma::Matrix<f32>, dst: &mut SharedMemory<f32>, start: usize, #[comptime] ld: usize) {
    cmma::store(&mut dst.slice_mut(start, start + 15 * ld + 16), acc, ld as u32, cmma::MatrixLayout::RowMajor);
}

/// `dst[16g + r][j] = Σ_c a[16g + r][c] · b[j][c]` for the plane's rows: `a` is a `[rows, dim]`
/// tile, `b` a `[cols, dim]` tile (both input dtype), `dst` `[rows, cols]` f32.
#[cube]
pub fn products<F: Float>(
    a: &SharedMemory<F>,
    b: &SharedMemory<F>,
    dst: &mut SharedMemory<f32>,
    #[comptime] cols: usize,
    #[comptime] dim: usize,
) {
    let g = UNIT_POS_Y as usize;
    let a_op = comptime!(Operand { ld: dim, step: 16, col_major: false });
    let b_op = comptime!(Operand { ld: dim, step: 16, col_major: true });
    #[unroll]
    for nb in 0..comptime!(cols / 16) {
        let d_start = g * GROUP_ROWS * cols + nb * 16;
        let acc = accumulator(dst, d_start, cols, false);
        mma_sum::<F>(&acc, a, g * GROUP_ROWS * dim, a_op, b, nb * 16 * dim, b_op, comptime!(dim / 16));
        store(&acc, dst, d_start, cols);
    }
}

/// `dst[16g + r][c] += Σ_j a[16g + r][j] · b[j][c]` for the plane's rows: `a` is `[rows, k]`, `b`
/// `[k, dim]` (both input dtype), `dst` `[rows, dim]` f32.
#[cube]
pub fn accumulate<F: Float>(
    a: &SharedMemory<F>,
    b: &SharedMemory<F>,
    dst: &mut SharedMemory<f32>,
    #[comptime] k: usize,
    #[comptime] dim: usize,
) {
    let g = UNIT_POS_Y as usize;
    let a_op = comptime!(Operand { ld: k, step: 16, col_major: false });
    let b_op = comptime!(Operand { ld: dim, step: 16 * dim, col_major: false });
    #[unroll]
    for ub in 0..comptime!(dim / 16) {
        let d_start = g * GROUP_ROWS * dim + ub * 16;
        let acc = accumulator(dst, d_start, dim, true);
        mma_sum::<F>(&acc, a, g * GROUP_ROWS * k, a_op, b, ub * 16, b_op, comptime!(k / 16));
        store(&acc, dst, d_start, dim);
    }
}
