//! Backward of the CPU kernel (FlashAttention-2 from the saved log-sum-exp), split so that each
//! gradient element is summed in one fixed order, whatever the number of threads:
//! D = rowsum(dO ∘ O); then one pass over (batch·head, key slab) tasks, where a slab
//! is up to a quarter of the keys in whole key tiles (the split depends on the shape alone). A
//! task visits its key tiles in order and, for each, the query tiles that see it; per tile pair it
//! recomputes P = exp(scale·Q·Kᵀ − lse) and dS = P ∘ (dO·Vᵀ − D) and accumulates
//! dV += Pᵀ·dO, dK += scale·dSᵀ·Q and the slab's share of dQ += scale·dS·K. dQ is the sum of
//! the slabs' shares in slab order: five products per tile pair, as in FlashAttention-2, without
//! atomics. The shares cost up to four copies of dQ in memory.
//!
//! As in the forward, the score products read `Q` and `dO` transposed tile by tile as
//! column-major left operands and write P and dS column-major (`ld × keys`), which the products
//! that consume them read in place.

use super::gemm::{View, matmul, matmul_strided, transpose_tiles};
use super::tiles::{Group, KEY_TILE, QUERY_TILE, clip, query_tiles, split};
use super::{Dims, part, simd};
use rayon::prelude::*;
use std::ops::Range;

/// At most this many key slabs per head: the dQ shares summed at the end.
const MAX_SLABS: usize = 4;
/// Values per task of the final sum of the dQ shares.
const SUM_CHUNK: usize = 1 << 14;

/// Inputs of one head: `q`, `grad` `[nq, d]` and tile-transposed (`qt`, `gt`), `k`, `v` `[nk, d]`,
/// `lse`, `delta` `[nq]`.
#[derive(Clone, Copy)]
struct Head<'a> {
    q: &'a [f32],
    qt: &'a [f32],
    gt: &'a [f32],
    k: &'a [f32],
    v: &'a [f32],
    grad: &'a [f32],
    lse: &'a [f32],
    delta: &'a [f32],
    d: usize,
}

/// Per-pair scratch: the score / probability tile and the dP / dS tile, column-major `ld × keys`.
struct Scratch {
    p: Vec<f32>,
    ds: Vec<f32>,
}

impl Scratch {
    fn new() -> Self {
        Self { p: vec![0.0; QUERY_TILE * KEY_TILE], ds: vec![0.0; QUERY_TILE * KEY_TILE] }
    }
}

impl Head<'_> {
    fn rows<'b>(&self, x: &'b [f32], r: &Range<usize>) -> View<'b> {
        View::rows(&x[r.start * self.d..r.end * self.d], r.len(), self.d, self.d)
    }

    fn cols<'b>(&self, xt: &'b [f32], r: &Range<usize>) -> View<'b> {
        View::cols(&xt[r.start * self.d..r.end * self.d], r.len(), self.d, r.len())
    }

    /// Fills `p` with P and `ds` with dS for one tile pair; returns their column stride `ld`.
    fn probabilities(&self, rows: &Range<usize>, keys: &Range<usize>, s: &mut Scratch) -> usize {
        let (ld, n) = (rows.len().next_multiple_of(simd::LANES), keys.len());
        let scale = 1.0 / (self.d as f32).sqrt();
        matmul_strided(&mut s.p, [1, ld], self.cols(self.qt, rows), self.rows(self.k, keys).t(), scale, false);
        matmul_strided(&mut s.ds, [1, ld], self.cols(self.gt, rows), self.rows(self.v, keys).t(), 1.0, false);
        let (lse, delta) = (&self.lse[rows.clone()], &self.delta[rows.clone()]);
        simd::softmax_grad(&mut s.p[..ld * n], &mut s.ds[..ld * n], ld, lse, delta);
        ld
    }
}

/// `[dq, dk, dv]` (row-major like `q`, `k`, `v`) from the inputs, the forward's `out` and `lse`
/// and the output gradient `grad`.
#[allow(clippy::too_many_arguments)]
pub fn backward(q: &[f32], k: &[f32], v: &[f32], out: &[f32], lse: &[f32], grad: &[f32], dims: Dims, groups: &[Group]) -> [Vec<f32>; 3] {
    let Dims { bh, q_tokens: nq, k_tokens: nk, head_dim: d } = dims;
    let scale = 1.0 / (d as f32).sqrt();
    let mut delta = vec![0.0f32; bh * nq];
    delta.par_chunks_mut(nq.max(1)).enumerate().for_each(|(h, dl)| {
        for (i, x) in dl.iter_mut().enumerate() {
            let r = (h * nq + i) * d..(h * nq + i + 1) * d;
            *x = simd::dot(&grad[r.clone()], &out[r]);
        }
    });
    let tiles = query_tiles(groups);
    let rows: Vec<_> = tiles.iter().map(|(_, rows)| rows.clone()).collect();
    let (qt, gt) = (transpose_tiles(q, nq, d, &rows), transpose_tiles(grad, nq, d, &rows));
    let head = |h: usize| {
        let (rows, keys) = (nq * d, nk * d);
        Head {
            q: part(q, h, rows),
            qt: part(&qt, h, rows),
            gt: part(&gt, h, rows),
            k: part(k, h, keys),
            v: part(v, h, keys),
            grad: part(grad, h, rows),
            lse: part(lse, h, nq),
            delta: part(&delta, h, nq),
            d,
        }
    };

    // Tasks are (head, key slab): each computes its slab's dK and dV whole and the slab's share
    // of dQ, summed over the slabs afterwards in slab order. The split depends on the shape only.
    let slab = KEY_TILE * nk.div_ceil(KEY_TILE).div_ceil(MAX_SLABS).max(1);
    let slabs: Vec<_> = split(0..nk, slab).collect();
    let (mut dk, mut dv) = (vec![0.0f32; bh * nk * d], vec![0.0f32; bh * nk * d]);
    let mut shares = vec![0.0f32; slabs.len() * bh * nq * d];
    let mut work = Vec::with_capacity(bh * slabs.len());
    let mut share = shares.chunks_mut((nq * d).max(1));
    for (h, (mut dk, mut dv)) in dk.chunks_mut(nk * d).zip(dv.chunks_mut(nk * d)).enumerate() {
        for keys in &slabs {
            let (k_slab, k_rest) = std::mem::take(&mut dk).split_at_mut(keys.len() * d);
            let (v_slab, v_rest) = std::mem::take(&mut dv).split_at_mut(keys.len() * d);
            (dk, dv) = (k_rest, v_rest);
            work.push((h, keys.clone(), k_slab, v_slab, share.next().expect("one share per task")));
        }
    }
    work.into_par_iter().for_each_init(Scratch::new, |s, (h, slab, dk, dv, dq)| {
        let head = head(h);
        for tile in split(slab.clone(), KEY_TILE) {
            for group in groups {
                for keys in clip(&group.keys, &tile) {
                    let at = (keys.start - slab.start) * d..(keys.end - slab.start) * d;
                    for rows in split(group.rows.clone(), QUERY_TILE) {
                        let ld = head.probabilities(&rows, &keys, s);
                        let (m, n) = (rows.len(), keys.len());
                        let (p, ds) = (View::cols(&s.p, m, n, ld), View::cols(&s.ds, m, n, ld));
                        matmul(&mut dv[at.clone()], d, p.t(), head.rows(head.grad, &rows), 1.0, true);
                        matmul(&mut dk[at.clone()], d, ds.t(), head.rows(head.q, &rows), scale, true);
                        matmul(&mut dq[rows.start * d..rows.end * d], d, ds, head.rows(head.k, &keys), scale, true);
                    }
                }
            }
        }
    });
    let dq = if slabs.len() == 1 {
        shares
    } else {
        let mut dq = vec![0.0f32; bh * nq * d];
        let len = dq.len();
        dq.par_chunks_mut(SUM_CHUNK).enumerate().for_each(|(c, dq)| {
            for share in shares.chunks_exact(len) {
                dq.iter_mut().zip(&share[c * SUM_CHUNK..]).for_each(|(x, &y)| *x += y);
            }
        });
        dq
    };
    [dq, dk, dv]
}
