//! Shared helpers of the attention kernels: reading a head through its strides, staging a tile of
//! tokens into shared memory in the input dtype, and the per-unit register tile.
//!
//! Loop shape. Two limits of Mesa's lavapipe (llvmpipe), the runtime every test runs on, decide
//! which loops are unrolled:
//! - It counts the back-edges of *all* loops of an invocation against one limit of 65,535
//!   (`LP_MAX_TGSI_LOOP_ITERATIONS`) and from then on leaves every loop after one iteration, so no
//!   loop may take a back-edge per head-dim element *and* per token.
//! - Its LLVM splits a compute shader into coroutines at each barrier; that split grows much
//!   faster than the code, and fully unrolled products at head dim 128 (tens of thousands of
//!   instructions between barriers) took more than ten minutes to compile.
//!
//! So the loops over a register tile's rows and columns are unrolled (their indices must be
//! constants to stay in registers), and the loops over the head dim and over a staged step's
//! tokens are runtime loops over unrolled chunks of [`chunk`] elements: a staged step of `cols`
//! tokens takes about `dim / 8 + cols` back-edges per product, so a row can walk about ten
//! thousand tokens on lavapipe. Staging a tile stays unrolled (`tokens × dim / units` loads,
//! no products), and so do the `cmma` paths, which only CUDA compiles. GPUs have neither limit.

use super::tiles::{GROUP_ROWS, PLANE};
use cubecl::prelude::*;

/// Offset of head `bh` (batch × heads + head) of `x: [batch, heads, tokens, dim]`.
#[cube]
pub fn head_offset<F: Float>(x: &Tensor<F>, bh: usize) -> usize {
    let heads = x.shape(1);
    (bh / heads) * x.stride(0) + (bh % heads) * x.stride(1)
}

/// Copies tokens `first..first + count` (`count ≥ 1`) of one head (`base`, [`head_offset`]) of
/// `src`, read through its strides, into `dst[r * dim + c]` for `r < tokens`; rows
/// `count..tokens` become zero, so a partial tile contributes nothing. All `units` units of the
/// cube take part.
#[cube]
#[allow(clippy::too_many_arguments)]
pub fn stage_tile<F: Float>(
    src: &Tensor<F>,
    base: usize,
    first: usize,
    count: usize,
    dst: &mut SharedMemory<F>,
    #[comptime] tokens: usize,
    #[comptime] dim: usize,
    #[comptime] units: usize,
) {
    let unit = UNIT_POS as usize;
    let st = src.stride(2);
    let sc = src.stride(3);
    let last = first + count - 1;
    #[unroll]
    for t in 0..comptime!((tokens * dim).div_ceil(units)) {
        let i = t * units + unit;
        if i < comptime!(tokens * dim) {
            let r = i / dim;
            let x = src[base + min(first + r, last) * st + (i % dim) * sc];
            dst[i] = select(r < count, x, F::new(0.0));
        }
    }
}

/// Copies `count ≤ tokens` consecutive f32 values of `src` from `first` into `dst`, zero beyond.
#[cube]
pub fn stage_stats(
    src: &Tensor<f32>,
    first: usize,
    count: usize,
    dst: &mut SharedMemory<f32>,
    #[comptime] tokens: usize,
    #[comptime] units: usize,
) {
    let unit = UNIT_POS as usize;
    #[unroll]
    for t in 0..comptime!(tokens.div_ceil(units)) {
        let i = t * units + unit;
        if i < tokens {
            let mut x = 0.0f32;
            if i < count {
                x = src[first + i];
            }
            dst[i] = x;
        }
    }
}

/// Columns of the head dim a unit owns in its register tile: `lane + 32u` for `u < ⌈dim/32⌉`.
pub fn cols_per_lane(dim: usize) -> usize {
    dim.div_ceil(PLANE)
}

/// The unrolled chunk of a runtime loop over `n` elements: the largest of 8, 4, 2, 1 dividing `n`.
pub fn chunk(n: usize) -> usize {
    [8, 4, 2, 1].into_iter().find(|c| n.is_multiple_of(*c)).unwrap_or(1)
}

/// `acc[r][u] += Σ_j a[row0 + r][j] · b[j][lane + 32u]` over `j < cols`, for the plane's
/// [`GROUP_ROWS`] rows: `a` is `[rows, cols]` f32 in shared memory, `b` is `[cols, dim]` in the
/// input dtype (staged tokens). `acc` is the unit's `16 × ⌈dim/32⌉` register tile, row-major.
#[cube]
pub fn accumulate_tile<F: Float>(
    acc: &mut Array<f32>,
    a: &SharedMemory<f32>,
    row0: usize,
    b: &SharedMemory<F>,
    #[comptime] cols: usize,
    #[comptime] dim: usize,
) {
    let lane = UNIT_POS_X as usize;
    let cpl = comptime!(cols_per_lane(dim));
    let mut bv = Array::<f32>::new(cpl);
    for j in 0..cols {
        #[unroll]
        for u in 0..cpl {
            // Lanes past the head dim (dim not a multiple of 32) read a valid column and never
            // store it.
            let c = min(lane + u * PLANE, comptime!(dim - 1));
            bv[u] = f32::cast_from(b[j * dim + c]);
        }
        #[unroll]
        for r in 0..GROUP_ROWS {
            let p = a[(row0 + r) * cols + j];
            #[unroll]
            for u in 0..cpl {
                acc[r * cpl + u] += p * bv[u];
            }
        }
    }
}

/// Zeroes `dst[..len]`, all `units` units of the cube taking part.
#[cube]
pub fn zero_shared(dst: &mut SharedMemory<f32>, #[comptime] len: usize, #[comptime] units: usize) {
    let unit = UNIT_POS as usize;
    let rounds = comptime!(len.div_ceil(units));
    let ch = comptime!(chunk(rounds));
    for tb in 0..comptime!(rounds / ch) {
        #[unroll]
        for ti in 0..ch {
            let i = (tb * ch + ti) * units + unit;
            if i < len {
                dst[i] = 0.0;
            }
        }
    }
}

/// `acc[16g + r][c] *= factor[16g + r]` on the plane's rows of a `[rows, dim]` f32 accumulator in
/// shared memory (the `cmma` path's), each unit taking the columns `lane + 32u`.
#[cube]
pub fn scale_shared(acc: &mut SharedMemory<f32>, factor: &SharedMemory<f32>, #[comptime] dim: usize) {
    let (lane, g) = (UNIT_POS_X as usize, UNIT_POS_Y as usize);
    #[unroll]
    for r in 0..GROUP_ROWS {
        let f = factor[g * GROUP_ROWS + r];
        #[unroll]
        for u in 0..comptime!(cols_per_lane(dim)) {
            let c = lane + u * PLANE;
            if c < dim {
                acc[(g * GROUP_ROWS + r) * dim + c] *= f;
            }
        }
    }
}

/// [`accumulate_tile`] on the plane's rows of an `[rows, dim]` f32 accumulator in shared memory:
/// the unit's elements are held in a register tile for the step only, not across steps.
#[cube]
pub fn accumulate_shared<F: Float>(
    acc: &mut SharedMemory<f32>,
    a: &SharedMemory<f32>,
    b: &SharedMemory<F>,
    #[comptime] cols: usize,
    #[comptime] dim: usize,
) {
    let (lane, g) = (UNIT_POS_X as usize, UNIT_POS_Y as usize);
    let cpl = comptime!(cols_per_lane(dim));
    let mut tile = Array::<f32>::new(comptime!(GROUP_ROWS * cpl));
    #[unroll]
    for i in 0..comptime!(GROUP_ROWS * cpl) {
        let c = min(lane + (i % cpl) * PLANE, comptime!(dim - 1));
        tile[i] = acc[(g * GROUP_ROWS + i / cpl) * dim + c];
    }
    accumulate_tile::<F>(&mut tile, a, g * GROUP_ROWS, b, cols, dim);
    #[unroll]
    for i in 0..comptime!(GROUP_ROWS * cpl) {
        let c = lane + (i % cpl) * PLANE;
        if c < dim {
            acc[(g * GROUP_ROWS + i / cpl) * dim + c] = tile[i];
        }
    }
}

/// `dst[row0 + r][j] = Σ_c x[row r][c] · y[j][c]` for the plane's [`GROUP_ROWS`] rows and
/// `j < cols`: `x` is read from global memory (`base` + row `first + r`, clamped to `last` so an
/// idle row reads a valid one), `y` is a staged `[cols, dim]` tile. Unit `lane` owns column
/// `lane % cols` and rows `lane / cols + (32 / cols) t` (`cols` divides 32).
#[cube]
#[allow(clippy::too_many_arguments)]
pub fn products_tile<F: Float>(
    x: &Tensor<F>,
    base: usize,
    first: usize,
    last: usize,
    y: &SharedMemory<F>,
    dst: &mut SharedMemory<f32>,
    row0: usize,
    #[comptime] cols: usize,
    #[comptime] dim: usize,
) {
    let lane = UNIT_POS_X as usize;
    let per = comptime!(GROUP_ROWS * cols / PLANE);
    let step = comptime!(PLANE / cols);
    let j = lane % cols;
    let r0 = lane / cols;
    let st = x.stride(2);
    let sc = x.stride(3);
    let mut s = Array::<f32>::new(per);
    #[unroll]
    for t in 0..per {
        s[t] = 0.0;
    }
    let ch = comptime!(chunk(dim));
    for cb in 0..comptime!(dim / ch) {
        #[unroll]
        for ci in 0..ch {
            let c = cb * ch + ci;
            let yv = f32::cast_from(y[j * dim + c]);
            #[unroll]
            for t in 0..per {
                let row = min(first + r0 + t * step, last);
                s[t] += f32::cast_from(x[base + row * st + c * sc]) * yv;
            }
        }
    }
    #[unroll]
    for t in 0..per {
        dst[(row0 + r0 + t * step) * cols + j] = s[t];
    }
}
