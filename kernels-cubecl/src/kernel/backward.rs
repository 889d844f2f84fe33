//! Flash-attention backward (FlashAttention-2): gradients from the saved log-sum-exp.
//!
//! With `s = scale · q·k`, `p = exp(s − lse)`, `delta = rowsum(dO ∘ O)` and
//! `ds = p · (dO·v − delta)`: `dV = Σ_q p · dO`, `dK = Σ_q ds · scale · q`, `dQ = Σ_k ds · scale · k`.
//!
//! - [`flash_backward_dq`]: grid `(query tiles, batch × heads)`, one unit per query row, stages
//!   K/V through shared memory; writes `dq` and `delta: [batch, heads, q_tokens]` (f32).
//! - [`flash_backward_dkv`]: grid `(key tiles, batch × heads)`, one unit per key row, stages the
//!   scaled queries, `dO`, `lse` and `delta` of the query ranges that see the tile; writes `dk`,
//!   `dv` (zero for keys no query sees). Runs after the dQ kernel, which produced `delta`.
//!
//! All accumulation is in f32; inputs and gradients are in the input dtype. Loops over `dim` are
//! unrolled ([`super::stage`] says why).

use super::stage::stage_rows;
use cubecl::prelude::*;

#[cube(launch)]
#[allow(clippy::too_many_arguments)]
pub fn flash_backward_dq<F: Float>(
    q: &Tensor<F>,
    k: &Tensor<F>,
    v: &Tensor<F>,
    out: &Tensor<F>,
    grad: &Tensor<F>,
    lse: &Tensor<f32>,
    tiles: &Tensor<u32>,
    ranges: &Tensor<u32>,
    dq: &mut Tensor<F>,
    delta: &mut Tensor<f32>,
    #[comptime] dim: usize,
    #[comptime] stage: usize,
    #[comptime] rows: usize,
    #[define(F)] _dtype: StorageType,
) {
    let tile = CUBE_POS_X as usize;
    let bh = CUBE_POS_Y as usize;
    let nq = q.shape(2);
    let nk = k.shape(2);
    let row = tiles[tile * 4] as usize + UNIT_POS_X as usize;
    let active = row < tiles[tile * 4 + 1] as usize;
    let q_base = (bh * nq + row) * dim;
    let k_base = bh * nk * dim;
    let scale = f32::new(comptime!(1.0 / (dim as f32).sqrt()));
    let slots = comptime!((stage * dim).div_ceil(rows));

    let mut qr = Array::<f32>::new(dim);
    let mut gr = Array::<f32>::new(dim);
    let mut acc = Array::<f32>::new(dim);
    let mut row_delta = 0.0f32;
    let mut row_lse = 0.0f32;
    for c in 0..dim {
        acc[c] = 0.0;
        qr[c] = 0.0;
        gr[c] = 0.0;
        if active {
            qr[c] = f32::cast_from(q[q_base + c]) * scale;
            gr[c] = f32::cast_from(grad[q_base + c]);
            row_delta += gr[c] * f32::cast_from(out[q_base + c]);
        }
    }
    if active {
        row_lse = lse[bh * nq + row];
    }
    let mut ks = SharedMemory::<f32>::new(stage * dim);
    let mut vs = SharedMemory::<f32>::new(stage * dim);

    for r in tiles[tile * 4 + 2] as usize..tiles[tile * 4 + 3] as usize {
        let key_end = ranges[r * 2 + 1] as usize;
        let mut key = ranges[r * 2] as usize;
        while key < key_end {
            let mut n = key_end - key;
            if n > stage {
                n = stage;
            }
            sync_cube();
            stage_rows::<F>(k, k_base + key * dim, n * dim, 1.0, &mut ks, slots, rows);
            stage_rows::<F>(v, k_base + key * dim, n * dim, 1.0, &mut vs, slots, rows);
            sync_cube();
            if active {
                for j in 0..n {
                    let mut s = 0.0f32;
                    let mut dp = 0.0f32;
                    #[unroll]
                    for c in 0..dim {
                        s += qr[c] * ks[j * dim + c];
                        dp += gr[c] * vs[j * dim + c];
                    }
                    let ds = f32::exp(s - row_lse) * (dp - row_delta);
                    #[unroll]
                    for c in 0..dim {
                        acc[c] += ds * ks[j * dim + c];
                    }
                }
            }
            key += stage;
        }
    }

    if active {
        for c in 0..dim {
            dq[q_base + c] = F::cast_from(acc[c] * scale);
        }
        delta[bh * nq + row] = row_delta;
    }
}

#[cube(launch)]
#[allow(clippy::too_many_arguments)]
pub fn flash_backward_dkv<F: Float>(
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
    #[comptime] dim: usize,
    #[comptime] stage: usize,
    #[comptime] rows: usize,
    #[define(F)] _dtype: StorageType,
) {
    let tile = CUBE_POS_X as usize;
    let bh = CUBE_POS_Y as usize;
    let unit = UNIT_POS_X as usize;
    let nq = q.shape(2);
    let nk = k.shape(2);
    let row = tiles[tile * 4] as usize + unit;
    let active = row < tiles[tile * 4 + 1] as usize;
    let k_row = (bh * nk + row) * dim;
    let q_base = bh * nq * dim;
    let scale = f32::new(comptime!(1.0 / (dim as f32).sqrt()));
    let slots = comptime!((stage * dim).div_ceil(rows));

    let mut kr = Array::<f32>::new(dim);
    let mut vr = Array::<f32>::new(dim);
    let mut dk_acc = Array::<f32>::new(dim);
    let mut dv_acc = Array::<f32>::new(dim);
    for c in 0..dim {
        dk_acc[c] = 0.0;
        dv_acc[c] = 0.0;
        kr[c] = 0.0;
        vr[c] = 0.0;
        if active {
            kr[c] = f32::cast_from(k[k_row + c]);
            vr[c] = f32::cast_from(v[k_row + c]);
        }
    }
    let mut qs = SharedMemory::<f32>::new(stage * dim);
    let mut gs = SharedMemory::<f32>::new(stage * dim);
    let mut lses = SharedMemory::<f32>::new(stage);
    let mut deltas = SharedMemory::<f32>::new(stage);

    for r in tiles[tile * 4 + 2] as usize..tiles[tile * 4 + 3] as usize {
        let query_end = ranges[r * 2 + 1] as usize;
        let mut query = ranges[r * 2] as usize;
        while query < query_end {
            let mut n = query_end - query;
            if n > stage {
                n = stage;
            }
            sync_cube();
            stage_rows::<F>(q, q_base + query * dim, n * dim, scale, &mut qs, slots, rows);
            stage_rows::<F>(grad, q_base + query * dim, n * dim, 1.0, &mut gs, slots, rows);
            // stage ≤ 32 = rows: one row statistic per unit.
            if unit < n {
                lses[unit] = lse[bh * nq + query + unit];
                deltas[unit] = delta[bh * nq + query + unit];
            }
            sync_cube();
            if active {
                for j in 0..n {
                    let mut s = 0.0f32;
                    let mut dp = 0.0f32;
                    #[unroll]
                    for c in 0..dim {
                        s += qs[j * dim + c] * kr[c];
                        dp += gs[j * dim + c] * vr[c];
                    }
                    let p = f32::exp(s - lses[j]);
                    let ds = p * (dp - deltas[j]);
                    #[unroll]
                    for c in 0..dim {
                        dv_acc[c] += p * gs[j * dim + c];
                        dk_acc[c] += ds * qs[j * dim + c];
                    }
                }
            }
            query += stage;
        }
    }

    if active {
        for c in 0..dim {
            dk[k_row + c] = F::cast_from(dk_acc[c]);
            dv[k_row + c] = F::cast_from(dv_acc[c]);
        }
    }
}
