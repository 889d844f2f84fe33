//! Forward of the CPU kernel: per (batch·head, query tile), S = scale·Q·Kᵀ over each allowed key
//! tile (GEMM), online softmax in f32, O += P·V (GEMM); then O /= l and lse = m + ln l. A row
//! without allowed keys outputs zeros and lse = −∞.

use super::gemm::{View, matmul};
use super::tiles::{Group, KEY_TILE, key_tiles, query_tiles};
use super::{Dims, part, simd};
use rayon::prelude::*;
use std::ops::Range;

/// `out: [bh, q_tokens, head_dim]`, `lse: [bh, q_tokens]` from `q`, `k`, `v` (row-major).
pub fn forward(q: &[f32], k: &[f32], v: &[f32], dims: Dims, groups: &[Group]) -> (Vec<f32>, Vec<f32>) {
    let Dims { q_tokens: nq, k_tokens: nk, head_dim: d, .. } = dims;
    let mut out = vec![0.0; dims.bh * nq * d];
    let mut lse = vec![f32::NEG_INFINITY; dims.bh * nq];
    let tiles = query_tiles(groups);
    let mut work = Vec::with_capacity(dims.bh * tiles.len());
    for (bh, (mut o, mut l)) in out.chunks_mut(nq * d).zip(lse.chunks_mut(nq)).enumerate() {
        for (g, rows) in &tiles {
            let (o_tile, o_rest) = std::mem::take(&mut o).split_at_mut(rows.len() * d);
            let (l_tile, l_rest) = std::mem::take(&mut l).split_at_mut(rows.len());
            (o, l) = (o_rest, l_rest);
            work.push((bh, &groups[*g], rows.clone(), o_tile, l_tile));
        }
    }
    work.into_par_iter().for_each(|(bh, group, rows, o, l)| {
        tile(part(q, bh, nq * d), part(k, bh, nk * d), part(v, bh, nk * d), d, group, rows, o, l);
    });
    (out, lse)
}

/// One query tile of one head: `q` `[nq, d]`, `k`, `v` `[nk, d]`; writes the tile's rows of O and lse.
#[allow(clippy::too_many_arguments)]
fn tile(q: &[f32], k: &[f32], v: &[f32], d: usize, group: &Group, rows: Range<usize>, o: &mut [f32], lse: &mut [f32]) {
    let m = rows.len();
    let scale = 1.0 / (d as f32).sqrt();
    let q = View::rows(&q[rows.start * d..rows.end * d], m, d, d);
    let mut s = vec![0.0f32; m * KEY_TILE];
    let (mut row_max, mut row_sum) = (vec![f32::NEG_INFINITY; m], vec![0.0f32; m]);
    for keys in key_tiles(group) {
        let n = keys.len();
        let kt = View::rows(&k[keys.start * d..keys.end * d], n, d, d);
        matmul(&mut s, n, q, kt.t(), scale, false);
        for i in 0..m {
            let row = &mut s[i * n..(i + 1) * n];
            let new_max = row_max[i].max(simd::max(row));
            let correction = if row_max[i] == f32::NEG_INFINITY { 0.0 } else { (row_max[i] - new_max).exp() };
            row_sum[i] = row_sum[i] * correction + simd::exp_shifted(row, new_max);
            row_max[i] = new_max;
            if correction != 1.0 {
                o[i * d..(i + 1) * d].iter_mut().for_each(|x| *x *= correction);
            }
        }
        matmul(o, d, View::rows(&s, m, n, n), View::rows(&v[keys.start * d..keys.end * d], n, d, d), 1.0, true);
    }
    for i in 0..m {
        if row_sum[i] > 0.0 {
            let inv = 1.0 / row_sum[i];
            o[i * d..(i + 1) * d].iter_mut().for_each(|x| *x *= inv);
            lse[i] = row_max[i] + row_sum[i].ln();
        }
    }
}
