//! Flash-attention forward over a query [`TilePlan`](super::plan::TilePlan), in FlashAttention-2's
//! work split ([`super::tiles`]).
//!
//! Grid: `(tiles, batch × heads)`; cube `(32, planes)`, plane `g` owning query rows
//! `16g..16g + 16` of the tile. For each staged step of `cols` keys (K and V in shared memory, in
//! the input dtype):
//! 1. scores `S = Q Kᵀ` of the plane's rows into shared memory (f32): `cmma` from the staged query
//!    tile, or the fallback's register tiles ([`products_tile`]);
//! 2. online softmax, one unit per row (running max and sum in registers): probabilities in
//!    place, each row's rescale factor in shared memory;
//! 3. `O ← O · factor + P V` in f32: with `cmma`, on an accumulator in shared memory (rescaled
//!    in place, then `P V` added by the tensor cores); else on each unit's `16 × ⌈dim/32⌉`
//!    register tile ([`accumulate_tile`]).
//!
//! Inputs are read through their strides. Writes `out: [batch, heads, q_tokens, dim]` (contiguous)
//! and `lse: [batch, heads, q_tokens]` (f32, natural log-sum-exp of the scaled scores; a row
//! without keys gets `out = 0`, `lse = f32::MIN`).

use super::mma;
use super::stage::{accumulate_tile, cols_per_lane, head_offset, products_tile, scale_shared, stage_tile, zero_shared};
use super::tiles::{GROUP_ROWS, PLANE};
use cubecl::prelude::*;

/// `acc[r][u] *= factor[16g + r]` on the unit's register tile.
#[cube]
pub fn scale_rows(acc: &mut Array<f32>, factor: &SharedMemory<f32>, #[comptime] dim: usize) {
    let g = UNIT_POS_Y as usize;
    let cpl = comptime!(cols_per_lane(dim));
    #[unroll]
    for r in 0..GROUP_ROWS {
        let f = factor[g * GROUP_ROWS + r];
        #[unroll]
        for u in 0..cpl {
            acc[r * cpl + u] *= f;
        }
    }
}

#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
pub fn flash_forward<F: Float>(
    q: &Tensor<F>,
    k: &Tensor<F>,
    v: &Tensor<F>,
    tiles: &Tensor<u32>,
    ranges: &Tensor<u32>,
    out: &mut Tensor<F>,
    lse: &mut Tensor<f32>,
    #[comptime] dim: usize,
    #[comptime] planes: usize,
    #[comptime] cols: usize,
    #[comptime] cmma: bool,
    #[define(F)] _dtype: StorageType,
) {
    let (lane, g) = (UNIT_POS_X as usize, UNIT_POS_Y as usize);
    let tile = CUBE_POS_X as usize;
    let bh = CUBE_POS_Y as usize;
    let rows = comptime!(GROUP_ROWS * planes);
    let units = comptime!(PLANE * planes);
    let cpl = comptime!(cols_per_lane(dim));
    let nq = q.shape(2);
    let row0 = tiles[tile * 4] as usize;
    let row_end = tiles[tile * 4 + 1] as usize;
    let (q_base, k_base, v_base) = (head_offset::<F>(q, bh), head_offset::<F>(k, bh), head_offset::<F>(v, bh));
    let scale = f32::new(comptime!(1.0 / (dim as f32).sqrt()));

    let mut ks = SharedMemory::<F>::new(cols * dim);
    let mut vs = SharedMemory::<F>::new(cols * dim);
    let mut ss = SharedMemory::<f32>::new(rows * cols);
    let mut factor = SharedMemory::<f32>::new(rows);
    // The cmma path's query tile, probabilities (input dtype) and output accumulator (f32); the
    // fallback accumulates the output in each unit's register tile.
    let mut qs = SharedMemory::<F>::new(comptime!(if cmma { rows * dim } else { 1 }));
    let mut ps = SharedMemory::<F>::new(comptime!(if cmma { rows * cols } else { 1 }));
    let mut acc_sh = SharedMemory::<f32>::new(comptime!(if cmma { rows * dim } else { 1 }));
    let mut acc = Array::<f32>::new(comptime!(if cmma { 1 } else { GROUP_ROWS * cpl }));
    if comptime!(cmma) {
        stage_tile::<F>(q, q_base, row0, row_end - row0, &mut qs, rows, dim, units);
        zero_shared(&mut acc_sh, rows * dim, units);
    } else {
        #[unroll]
        for i in 0..comptime!(GROUP_ROWS * cpl) {
            acc[i] = 0.0;
        }
    }
    // Row statistics, held by unit `lane < 16` for row `16g + lane`.
    let mut m = f32::min_value();
    let mut l = 0.0f32;
    let srow = g * GROUP_ROWS + lane;

    for r in tiles[tile * 4 + 2] as usize..tiles[tile * 4 + 3] as usize {
        let key_end = ranges[r * 2 + 1] as usize;
        let mut key = ranges[r * 2] as usize;
        while key < key_end {
            let n = min(key_end - key, cols);
            sync_cube();
            stage_tile::<F>(k, k_base, key, n, &mut ks, cols, dim, units);
            stage_tile::<F>(v, v_base, key, n, &mut vs, cols, dim, units);
            sync_cube();
            if comptime!(cmma) {
                mma::products::<F>(&qs, &ks, &mut ss, cols, dim);
            } else {
                products_tile::<F>(q, q_base, row0 + g * GROUP_ROWS, row_end - 1, &ks, &mut ss, g * GROUP_ROWS, cols, dim);
            }
            sync_cube();
            if lane < GROUP_ROWS {
                let mut mx = m;
                for j in 0..n {
                    mx = f32::max(mx, ss[srow * cols + j] * scale);
                }
                let mut sum = 0.0f32;
                for j in 0..cols {
                    let p = select(j < n, f32::exp(ss[srow * cols + j] * scale - mx), 0.0);
                    sum += p;
                    if comptime!(cmma) {
                        ps[srow * cols + j] = F::cast_from(p);
                    } else {
                        ss[srow * cols + j] = p;
                    }
                }
                let corr = f32::exp(m - mx);
                l = l * corr + sum;
                m = mx;
                factor[srow] = corr;
            }
            sync_cube();
            if comptime!(cmma) {
                scale_shared(&mut acc_sh, &factor, dim);
                sync_cube();
                mma::accumulate::<F>(&ps, &vs, &mut acc_sh, cols, dim);
            } else {
                scale_rows(&mut acc, &factor, dim);
                accumulate_tile::<F>(&mut acc, &ss, g * GROUP_ROWS, &vs, cols, dim);
            }
            key += cols;
        }
    }

    sync_cube();
    if lane < GROUP_ROWS {
        let row = row0 + srow;
        let mut inv = 0.0f32;
        if l > 0.0 {
            inv = 1.0 / l;
        }
        factor[srow] = inv;
        if row < row_end {
            let mut row_lse = f32::min_value();
            if l > 0.0 {
                row_lse = m + f32::ln(l);
            }
            lse[bh * nq + row] = row_lse;
        }
    }
    sync_cube();
    #[unroll]
    for r in 0..GROUP_ROWS {
        let row = row0 + g * GROUP_ROWS + r;
        let inv = factor[g * GROUP_ROWS + r];
        #[unroll]
        for u in 0..cpl {
            let c = lane + u * PLANE;
            if row < row_end && c < dim {
                let o = if comptime!(cmma) { acc_sh[(g * GROUP_ROWS + r) * dim + c] } else { acc[r * cpl + u] };
                out[(bh * nq + row) * dim + c] = F::cast_from(o * inv);
            }
        }
    }
}
