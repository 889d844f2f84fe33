//! Backward of the CPU kernel (FlashAttention-2 from the saved log-sum-exp), in two passes so
//! that each gradient element is summed by one task in one fixed order, whatever the number of
//! threads: D = rowsum(dO ∘ O); pass 1 over (batch·head, query tile) accumulates
//! dQ = scale·Σ dS·K over the tile's key tiles; pass 2 over (batch·head, key tile) accumulates
//! dV = Σ Pᵀ·dO and dK = scale·Σ dSᵀ·Q over the query tiles that see it, with
//! P = exp(scale·Q·Kᵀ − lse) and dS = P ∘ (dO·Vᵀ − D) recomputed per tile pair.

use super::gemm::{View, matmul};
use super::tiles::{Group, KEY_TILE, QUERY_TILE, clip, key_tiles, query_tiles, split};
use super::{Dims, part, simd};
use rayon::prelude::*;
use std::ops::Range;

/// Inputs of one head: `q`, `o`, `grad` `[nq, d]`, `k`, `v` `[nk, d]`, `lse`, `delta` `[nq]`.
#[derive(Clone, Copy)]
struct Head<'a> {
    q: &'a [f32],
    k: &'a [f32],
    v: &'a [f32],
    grad: &'a [f32],
    lse: &'a [f32],
    delta: &'a [f32],
    d: usize,
}

/// Per-pair scratch: the score / probability tile and the dP / dS tile.
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

    /// Fills `p` with P and `ds` with dS (row-major `rows × keys`) for one tile pair.
    fn probabilities(&self, rows: &Range<usize>, keys: &Range<usize>, s: &mut Scratch) {
        let (m, n) = (rows.len(), keys.len());
        let scale = 1.0 / (self.d as f32).sqrt();
        matmul(&mut s.p, n, self.rows(self.q, rows), self.rows(self.k, keys).t(), scale, false);
        matmul(&mut s.ds, n, self.rows(self.grad, rows), self.rows(self.v, keys).t(), 1.0, false);
        for i in 0..m {
            let p = &mut s.p[i * n..(i + 1) * n];
            simd::exp_shifted(p, self.lse[rows.start + i]);
            let delta = self.delta[rows.start + i];
            s.ds[i * n..(i + 1) * n].iter_mut().zip(p.iter()).for_each(|(ds, &p)| *ds = p * (*ds - delta));
        }
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
    let head = |h: usize| {
        let (rows, keys) = (nq * d, nk * d);
        Head {
            q: part(q, h, rows),
            k: part(k, h, keys),
            v: part(v, h, keys),
            grad: part(grad, h, rows),
            lse: part(lse, h, nq),
            delta: part(&delta, h, nq),
            d,
        }
    };

    let mut dq = vec![0.0f32; bh * nq * d];
    let tiles = query_tiles(groups);
    let mut work = Vec::with_capacity(bh * tiles.len());
    for (h, mut rest) in dq.chunks_mut(nq * d).enumerate() {
        for (g, rows) in &tiles {
            let (tile, tail) = std::mem::take(&mut rest).split_at_mut(rows.len() * d);
            rest = tail;
            work.push((h, &groups[*g], rows.clone(), tile));
        }
    }
    work.into_par_iter().for_each(|(h, group, rows, dq)| {
        let (head, mut s) = (head(h), Scratch::new());
        for keys in key_tiles(group) {
            head.probabilities(&rows, &keys, &mut s);
            matmul(dq, d, View::rows(&s.ds, rows.len(), keys.len(), keys.len()), head.rows(head.k, &keys), scale, true);
        }
    });

    let (mut dk, mut dv) = (vec![0.0f32; bh * nk * d], vec![0.0f32; bh * nk * d]);
    let mut work = Vec::new();
    for (h, (mut dk, mut dv)) in dk.chunks_mut(nk * d).zip(dv.chunks_mut(nk * d)).enumerate() {
        for keys in split(0..nk, KEY_TILE) {
            let (k_tile, k_rest) = std::mem::take(&mut dk).split_at_mut(keys.len() * d);
            let (v_tile, v_rest) = std::mem::take(&mut dv).split_at_mut(keys.len() * d);
            (dk, dv) = (k_rest, v_rest);
            work.push((h, keys, k_tile, v_tile));
        }
    }
    work.into_par_iter().for_each(|(h, tile, dk, dv)| {
        let (head, mut s) = (head(h), Scratch::new());
        for group in groups {
            for keys in clip(&group.keys, &tile) {
                let at = (keys.start - tile.start) * d..(keys.end - tile.start) * d;
                for rows in split(group.rows.clone(), QUERY_TILE) {
                    head.probabilities(&rows, &keys, &mut s);
                    let (m, n) = (rows.len(), keys.len());
                    matmul(&mut dv[at.clone()], d, View::rows(&s.p, m, n, n).t(), head.rows(head.grad, &rows), 1.0, true);
                    matmul(&mut dk[at.clone()], d, View::rows(&s.ds, m, n, n).t(), head.rows(head.q, &rows), scale, true);
                }
            }
        }
    });
    [dq, dk, dv]
}
