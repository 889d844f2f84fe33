//! Forward of the CPU kernel: per (batch·head, query tile), S = scale·Q·Kᵀ over each allowed key
//! tile (GEMM), online softmax in f32, O += P·V (GEMM); then O /= l and lse = m + ln l. A row
//! without allowed keys outputs zeros and lse = −∞.
//!
//! The queries are transposed once, tile by tile ([`transpose_tiles`]), so that gemm reads a
//! tile's queries as a column-major left operand for every key tile instead of repacking them;
//! the scores land column-major (`ld × keys`, `ld` = the tile's rows rounded up to
//! [`simd::LANES`]; the padding rows are computed and ignored), which the softmax step walks 16
//! rows at a time and the P·V product reads in place.

use super::gemm::{View, matmul, matmul_strided, transpose_tiles};
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
    let qt = transpose_tiles(q, nq, d, &tiles.iter().map(|(_, rows)| rows.clone()).collect::<Vec<_>>());
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
        tile(part(&qt, bh, nq * d), part(k, bh, nk * d), part(v, bh, nk * d), d, group, rows, o, l);
    });
    (out, lse)
}

/// One query tile of one head: `qt` the head's tile-transposed queries, `k`, `v` `[nk, d]`; writes
/// the tile's rows of O and lse.
#[allow(clippy::too_many_arguments)]
fn tile(qt: &[f32], k: &[f32], v: &[f32], d: usize, group: &Group, rows: Range<usize>, o: &mut [f32], lse: &mut [f32]) {
    let (m, ld) = (rows.len(), rows.len().next_multiple_of(simd::LANES));
    let scale = 1.0 / (d as f32).sqrt();
    let q = View::cols(&qt[rows.start * d..rows.end * d], m, d, m);
    let mut s = vec![0.0f32; ld * KEY_TILE];
    let (mut row_max, mut row_sum, mut corr) = (vec![f32::NEG_INFINITY; ld], vec![0.0f32; ld], vec![0.0f32; ld]);
    for keys in key_tiles(group) {
        let n = keys.len();
        let (k, v) = (View::rows(&k[keys.start * d..keys.end * d], n, d, d), View::rows(&v[keys.start * d..keys.end * d], n, d, d));
        matmul_strided(&mut s, [1, ld], q, k.t(), scale, false);
        simd::softmax_step(&mut s[..ld * n], ld, &mut row_max, &mut row_sum, &mut corr);
        for (o, &c) in o.chunks_exact_mut(d).zip(&corr) {
            if c != 1.0 {
                o.iter_mut().for_each(|x| *x *= c);
            }
        }
        matmul(o, d, View::cols(&s, m, n, ld), v, 1.0, true);
    }
    for i in 0..m {
        if row_sum[i] > 0.0 {
            let inv = 1.0 / row_sum[i];
            o[i * d..(i + 1) * d].iter_mut().for_each(|x| *x *= inv);
            lse[i] = row_max[i] + row_sum[i].ln();
        }
    }
}
