//! Flash-attention forward over a query [`TilePlan`](super::plan::TilePlan).
//!
//! Grid: `(tiles, batch × heads)`; one unit per query row of the tile (`rows` units). Keys and
//! values of the visited ranges are staged through shared memory `stage` rows at a time (cast to
//! f32); each unit keeps its scaled query row, running max, running sum and output accumulator in
//! f32 (online softmax). Loops over `dim` are unrolled ([`super::stage`] says why).
//! Writes `out: [batch, heads, q_tokens, dim]` and `lse: [batch, heads, q_tokens]` (f32, natural
//! log-sum-exp of the scaled scores; a row without keys gets `out = 0`, `lse = f32::MIN`).

use super::stage::stage_rows;
use cubecl::prelude::*;

#[cube(launch)]
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
    let mut acc = Array::<f32>::new(dim);
    let mut s = Array::<f32>::new(stage);
    for c in 0..dim {
        acc[c] = 0.0;
        qr[c] = 0.0;
        if active {
            qr[c] = f32::cast_from(q[q_base + c]) * scale;
        }
    }
    let mut m = f32::min_value();
    let mut l = 0.0f32;
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
                let mut mx = m;
                for j in 0..n {
                    let mut dot = 0.0f32;
                    #[unroll]
                    for c in 0..dim {
                        dot += qr[c] * ks[j * dim + c];
                    }
                    s[j] = dot;
                    mx = f32::max(mx, dot);
                }
                let corr = f32::exp(m - mx);
                l *= corr;
                #[unroll]
                for c in 0..dim {
                    acc[c] *= corr;
                }
                for j in 0..n {
                    let p = f32::exp(s[j] - mx);
                    l += p;
                    #[unroll]
                    for c in 0..dim {
                        acc[c] += p * vs[j * dim + c];
                    }
                }
                m = mx;
            }
            key += stage;
        }
    }

    if active {
        let mut inv = 0.0f32;
        let mut row_lse = f32::min_value();
        if l > 0.0 {
            inv = 1.0 / l;
            row_lse = m + f32::ln(l);
        }
        for c in 0..dim {
            out[q_base + c] = F::cast_from(acc[c] * inv);
        }
        lse[bh * nq + row] = row_lse;
    }
}
