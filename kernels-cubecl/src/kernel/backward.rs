//! Flash-attention backward in FlashAttention-2's two-kernel form: gradients from the saved
//! log-sum-exp, each score computed once.
//!
//! With `s = scale · q·k`, `p = exp(s − lse)`, `delta = rowsum(dO ∘ O)` and
//! `ds = p · (dO·v − delta)`: `dV = Σ_q p · dO`, `dK = scale · Σ_q ds · q`, `dQ = scale · Σ_k ds · k`.
//!
//! - [`flash_backward_delta`]: grid `(⌈q_tokens / 32⌉, batch × heads)`, one unit per query row;
//!   writes `delta: [batch, heads, q_tokens]` (f32) and zeroes that row of the f32 dQ
//!   accumulator.
//! - [`flash_backward`]: grid `(key tiles, batch × heads)`, cube `(32, planes)`, plane `g` owning
//!   key rows `16g..16g + 16` of a key tile ([`super::plan::TilePlan::keys`]). For each staged
//!   step of `cols` queries that see the tile (Q, dO in the input dtype, lse, delta):
//!   `Sᵀ = K Qᵀ` and `dPᵀ = V dOᵀ` (through `cmma`, or the fallback's register tiles), then
//!   `Pᵀ` and `dSᵀ` element-wise, then `dV += Pᵀ dO` and `dK += dSᵀ Q` (with `cmma` into f32
//!   accumulators in shared memory; else on each unit's register tiles, dK in shared memory
//!   where [`super::tiles::Tiles::shared_dk`]), and `dQ += dS K` added atomically into the f32
//!   accumulator (FlashAttention-2's Algorithm 2). Writes `dk`, `dv` (zero for keys no query
//!   sees) in the input dtype.
//!
//! The atomic adds make dQ's summation order, and so its last bits, depend on scheduling; dK and
//! dV are deterministic. All accumulation is in f32.

use super::mma;
use super::stage::{accumulate_shared, accumulate_tile, cols_per_lane, head_offset, products_tile, stage_stats, stage_tile, zero_shared};
use super::tiles::{GROUP_ROWS, PLANE};
use cubecl::prelude::*;

#[cube(launch_unchecked)]
pub fn flash_backward_delta<F: Float>(
    out: &Tensor<F>,
    grad: &Tensor<F>,
    delta: &mut Tensor<f32>,
    dq: &mut Tensor<f32>,
    #[comptime] dim: usize,
    #[define(F)] _dtype: StorageType,
) {
    let bh = CUBE_POS_Y as usize;
    let nq = out.shape(2);
    let row = CUBE_POS_X as usize * PLANE + UNIT_POS_X as usize;
    if row < nq {
        let (o_base, g_base) = (head_offset::<F>(out, bh) + row * out.stride(2), head_offset::<F>(grad, bh) + row * grad.stride(2));
        let mut sum = 0.0f32;
        for c in 0..dim {
            sum += f32::cast_from(out[o_base + c * out.stride(3)]) * f32::cast_from(grad[g_base + c * grad.stride(3)]);
            dq[(bh * nq + row) * dim + c] = 0.0;
        }
        delta[bh * nq + row] = sum;
    }
}

#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
pub fn flash_backward<F: Float>(
    q: &Tensor<F>,
    k: &Tensor<F>,
    v: &Tensor<F>,
    grad: &Tensor<F>,
    lse: &Tensor<f32>,
    delta: &Tensor<f32>,
    tiles: &Tensor<u32>,
    ranges: &Tensor<u32>,
    dk: &mut Tensor<F>,
    dv: &mut Tensor<F>,
    dq: &mut Tensor<Atomic<f32>>,
    #[comptime] dim: usize,
    #[comptime] planes: usize,
    #[comptime] cols: usize,
    #[comptime] cmma: bool,
    #[comptime] shared_dk: bool,
    #[define(F)] _dtype: StorageType,
) {
    let (lane, g) = (UNIT_POS_X as usize, UNIT_POS_Y as usize);
    let unit = UNIT_POS as usize;
    let tile = CUBE_POS_X as usize;
    let bh = CUBE_POS_Y as usize;
    let rows = comptime!(GROUP_ROWS * planes);
    let units = comptime!(PLANE * planes);
    let cpl = comptime!(cols_per_lane(dim));
    let (nq, nk) = (q.shape(2), k.shape(2));
    let row0 = tiles[tile * 4] as usize;
    let row_end = tiles[tile * 4 + 1] as usize;
    let (q_base, k_base, v_base, g_base) =
        (head_offset::<F>(q, bh), head_offset::<F>(k, bh), head_offset::<F>(v, bh), head_offset::<F>(grad, bh));
    let scale = f32::new(comptime!(1.0 / (dim as f32).sqrt()));

    let mut qs = SharedMemory::<F>::new(cols * dim);
    let mut gs = SharedMemory::<F>::new(cols * dim);
    let mut ls = SharedMemory::<f32>::new(cols);
    let mut dl = SharedMemory::<f32>::new(cols);
    let mut sp = SharedMemory::<f32>::new(rows * cols);
    let mut sd = SharedMemory::<f32>::new(rows * cols);
    // The cmma path's key and value tile, Pᵀ and dSᵀ in the input dtype, and dQ's bounce buffer.
    let mut kt = SharedMemory::<F>::new(comptime!(if cmma { rows * dim } else { 1 }));
    let mut vt = SharedMemory::<F>::new(comptime!(if cmma { rows * dim } else { 1 }));
    let mut pf = SharedMemory::<F>::new(comptime!(if cmma { rows * cols } else { 1 }));
    let mut df = SharedMemory::<F>::new(comptime!(if cmma { rows * cols } else { 1 }));
    let mut dqb = SharedMemory::<f32>::new(comptime!(if cmma { cols * dim } else { 1 }));
    if comptime!(cmma) {
        stage_tile::<F>(k, k_base, row0, row_end - row0, &mut kt, rows, dim, units);
        stage_tile::<F>(v, v_base, row0, row_end - row0, &mut vt, rows, dim, units);
    }

    // dV in shared memory with cmma, else in each unit's register tile; dK in shared memory with
    // cmma or `shared_dk`, else in a second register tile.
    let mut acc_dv = Array::<f32>::new(comptime!(if cmma { 1 } else { GROUP_ROWS * cpl }));
    let mut acc_dk = Array::<f32>::new(comptime!(if shared_dk { 1 } else { GROUP_ROWS * cpl }));
    #[unroll]
    for i in 0..comptime!(GROUP_ROWS * cpl) {
        if comptime!(!cmma) {
            acc_dv[i] = 0.0;
        }
        if comptime!(!shared_dk) {
            acc_dk[i] = 0.0;
        }
    }
    let mut dv_sh = SharedMemory::<f32>::new(comptime!(if cmma { rows * dim } else { 1 }));
    let mut dk_sh = SharedMemory::<f32>::new(comptime!(if shared_dk { rows * dim } else { 1 }));
    if comptime!(cmma) {
        zero_shared(&mut dv_sh, rows * dim, units);
    }
    if comptime!(shared_dk) {
        zero_shared(&mut dk_sh, rows * dim, units);
    }

    for r in tiles[tile * 4 + 2] as usize..tiles[tile * 4 + 3] as usize {
        let query_end = ranges[r * 2 + 1] as usize;
        let mut query = ranges[r * 2] as usize;
        while query < query_end {
            let n = min(query_end - query, cols);
            sync_cube();
            stage_tile::<F>(q, q_base, query, n, &mut qs, cols, dim, units);
            stage_tile::<F>(grad, g_base, query, n, &mut gs, cols, dim, units);
            stage_stats(lse, bh * nq + query, n, &mut ls, cols, units);
            stage_stats(delta, bh * nq + query, n, &mut dl, cols, units);
            sync_cube();
            if comptime!(cmma) {
                mma::products::<F>(&kt, &qs, &mut sp, cols, dim);
                mma::products::<F>(&vt, &gs, &mut sd, cols, dim);
            } else {
                products_tile::<F>(k, k_base, row0 + g * GROUP_ROWS, row_end - 1, &qs, &mut sp, g * GROUP_ROWS, cols, dim);
                products_tile::<F>(v, v_base, row0 + g * GROUP_ROWS, row_end - 1, &gs, &mut sd, g * GROUP_ROWS, cols, dim);
            }
            sync_cube();
            // Pᵀ and dSᵀ of the plane's rows; zero for queries past the step and idle key rows.
            #[unroll]
            for t in 0..comptime!(GROUP_ROWS * cols / PLANE) {
                let e = lane + t * PLANE;
                let (rr, j) = (e / cols, e % cols);
                let i = (g * GROUP_ROWS + rr) * cols + j;
                let mut p = 0.0f32;
                if j < n && row0 + g * GROUP_ROWS + rr < row_end {
                    p = f32::exp(sp[i] * scale - ls[j]);
                }
                let ds = p * (sd[i] - dl[j]);
                sp[i] = p;
                sd[i] = ds;
                if comptime!(cmma) {
                    pf[i] = F::cast_from(p);
                    df[i] = F::cast_from(ds);
                }
            }
            sync_cube();
            if comptime!(cmma) {
                mma::accumulate::<F>(&pf, &gs, &mut dv_sh, cols, dim);
                mma::accumulate::<F>(&df, &qs, &mut dk_sh, cols, dim);
                // dQ of the step: fragment `f` of `(cols / 16) × (dim / 16)` is plane `f % planes`'s.
                let frags = comptime!((cols / 16) * (dim / 16));
                #[unroll]
                for f0 in 0..comptime!(frags.div_ceil(planes)) {
                    let f = f0 * planes + g;
                    if f < frags {
                        let (qb, ub) = (f / comptime!(dim / 16), f % comptime!(dim / 16));
                        let d_start = qb * 16 * dim + ub * 16;
                        let acc = mma::accumulator(&dqb, d_start, dim, false);
                        let a_op = comptime!(mma::Operand { ld: cols, step: 16 * cols, col_major: true });
                        let b_op = comptime!(mma::Operand { ld: dim, step: 16 * dim, col_major: false });
                        mma::mma_sum::<F>(&acc, &df, qb * 16, a_op, &kt, ub * 16, b_op, comptime!(rows / 16));
                        mma::store(&acc, &mut dqb, d_start, dim);
                    }
                }
                sync_cube();
                #[unroll]
                for t in 0..comptime!((cols * dim).div_ceil(units)) {
                    let e = unit + t * units;
                    let j = e / dim;
                    if e < comptime!(cols * dim) && j < n {
                        dq[(bh * nq + query + j) * dim + e % dim].fetch_add(dqb[e] * scale);
                    }
                }
            } else {
                accumulate_tile::<F>(&mut acc_dv, &sp, g * GROUP_ROWS, &gs, cols, dim);
                if comptime!(shared_dk) {
                    accumulate_shared::<F>(&mut dk_sh, &sd, &qs, cols, dim);
                } else {
                    accumulate_tile::<F>(&mut acc_dk, &sd, g * GROUP_ROWS, &qs, cols, dim);
                }
                let ks = k.stride(2);
                let kc = k.stride(3);
                for t in 0..comptime!((cols * dim).div_ceil(units)) {
                    let e = unit + t * units;
                    let (j, c) = (e / dim, e % dim);
                    if e < comptime!(cols * dim) && j < n {
                        let mut sum = 0.0f32;
                        #[unroll]
                        for rr in 0..rows {
                            let key = min(row0 + rr, row_end - 1);
                            sum += sd[rr * cols + j] * f32::cast_from(k[k_base + key * ks + c * kc]);
                        }
                        dq[(bh * nq + query + j) * dim + c].fetch_add(sum * scale);
                    }
                }
            }
            query += cols;
        }
    }

    sync_cube();
    #[unroll]
    for rr in 0..GROUP_ROWS {
        let row = row0 + g * GROUP_ROWS + rr;
        #[unroll]
        for u in 0..cpl {
            let c = lane + u * PLANE;
            if row < row_end && c < dim {
                let dk_value = if comptime!(shared_dk) { dk_sh[(g * GROUP_ROWS + rr) * dim + c] } else { acc_dk[rr * cpl + u] };
                dk[(bh * nk + row) * dim + c] = F::cast_from(dk_value * scale);
                let dv_value = if comptime!(cmma) { dv_sh[(g * GROUP_ROWS + rr) * dim + c] } else { acc_dv[rr * cpl + u] };
                dv[(bh * nk + row) * dim + c] = F::cast_from(dv_value);
            }
        }
    }
}
