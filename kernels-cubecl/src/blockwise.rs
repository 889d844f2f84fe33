//! The portable block-sparse attention path: stock Burn tensor ops on any backend, differentiable
//! by Burn's autodiff, and the reference the fused kernels are tested against.
//!
//! `q: [batch, heads, q_tokens, head_dim]`, `k, v: [batch, heads, k_tokens, head_dim]` →
//! `[batch, heads, q_tokens, head_dim]`, scale `1/sqrt(head_dim)`, keys restricted by a
//! [`BlockTable`]. Each query group takes its query rows (a view), gathers only its allowed key
//! ranges (a view for one range, a concatenation of the ranges otherwise) and runs unmasked
//! softmax attention over them (Burn's `attention`: a flash kernel on CubeCL backends, the
//! separate-ops fallback elsewhere). Peak memory is O(group queries × allowed keys) per group,
//! never O(q_tokens × k_tokens) unless the table allows everything. A group without allowed keys
//! outputs zeros (as a fully masked row of Burn's fallback does).

use crate::BlockTable;
use burn::tensor::module::attention as burn_attention;
use burn::tensor::ops::AttentionModuleOptions;
use burn::tensor::{Tensor, backend::Backend};
use std::ops::Range;

/// Tokens `ranges` of `x` along the token axis, concatenated (a view when there is one range).
fn gather<B: Backend>(x: &Tensor<B, 4>, ranges: &[Range<usize>]) -> Tensor<B, 4> {
    let pick = |r: &Range<usize>| x.clone().narrow(2, r.start, r.len());
    match ranges {
        [r] => pick(r),
        _ => Tensor::cat(ranges.iter().map(pick).collect(), 2),
    }
}

/// Block-sparse scaled dot-product attention; see the module docs.
///
/// Panics when the token counts of `q`, `k`, `v` differ from the table's.
pub fn attention<B: Backend>(q: Tensor<B, 4>, k: Tensor<B, 4>, v: Tensor<B, 4>, table: &BlockTable) -> Tensor<B, 4> {
    let [b, h, nq, d] = q.dims();
    table.assert_tokens(nq, k.dims()[2], v.dims()[2]);
    let mut outputs = Vec::with_capacity(table.groups().len());
    for group in table.groups() {
        let rows = table.query_tokens(&group.frames);
        if rows.is_empty() {
            continue;
        }
        let keys = table.group_key_tokens(group);
        if keys.is_empty() {
            outputs.push(Tensor::zeros([b, h, rows.len(), d], &q.device()));
            continue;
        }
        let qg = q.clone().narrow(2, rows.start, rows.len());
        outputs.push(burn_attention(qg, gather(&k, &keys), gather(&v, &keys), None, None, AttentionModuleOptions::default()));
    }
    match outputs.len() {
        0 => Tensor::zeros([b, h, 0, d], &q.device()),
        1 => outputs.pop().expect("one group"),
        _ => Tensor::cat(outputs, 2),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::{Autodiff, NdArray};
    use burn::tensor::{Distribution, Int, TensorData};

    type B = NdArray;

    fn random(dims: [usize; 4], seed: u64) -> Tensor<B, 4> {
        B::seed(&Default::default(), seed);
        Tensor::random(dims, Distribution::Normal(0.0, 1.0), &Default::default())
    }

    /// Softmax attention in f64 on the host, one query token at a time, keys chosen by
    /// `is_allowed` on the token's frames (independent of the groups and ranges).
    fn host_reference(
        q: &Tensor<B, 4>,
        k: &Tensor<B, 4>,
        v: &Tensor<B, 4>,
        table: &BlockTable,
        q_sizes: &[usize],
        k_sizes: &[usize],
    ) -> Vec<f64> {
        let [b, h, nq, d] = q.dims();
        let nk = k.dims()[2];
        let [q, k, v] = [q, k, v].map(|t| t.to_data().to_vec::<f32>().unwrap());
        let frame_of = |sizes: &[usize]| -> Vec<usize> { sizes.iter().enumerate().flat_map(|(f, &n)| std::iter::repeat_n(f, n)).collect() };
        let (qf, kf) = (frame_of(q_sizes), frame_of(k_sizes));
        let scale = 1.0 / (d as f64).sqrt();
        let mut out = vec![0.0; b * h * nq * d];
        let row = |t: &[f32], bh: usize, j: usize, n: usize| -> Vec<f64> {
            t[(bh * n + j) * d..(bh * n + j + 1) * d].iter().map(|&x| x as f64).collect()
        };
        for bh in 0..b * h {
            for i in 0..nq {
                let qi = row(&q, bh, i, nq);
                let allowed: Vec<usize> = (0..nk).filter(|&j| table.is_allowed(qf[i], kf[j])).collect();
                let s: Vec<f64> =
                    allowed.iter().map(|&j| qi.iter().zip(row(&k, bh, j, nk)).map(|(a, b)| a * b).sum::<f64>() * scale).collect();
                let m = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let e: Vec<f64> = s.iter().map(|x| (x - m).exp()).collect();
                let z: f64 = e.iter().sum();
                for (&j, w) in allowed.iter().zip(&e) {
                    for (c, x) in row(&v, bh, j, nk).into_iter().enumerate() {
                        out[(bh * nq + i) * d + c] += w / z * x;
                    }
                }
            }
        }
        out
    }

    fn check_against_host(q_sizes: &[usize], k_sizes: &[usize], table: &BlockTable) {
        let (nq, nk) = table.tokens();
        let (q, k, v) = (random([2, 3, nq, 8], 1), random([2, 3, nk, 8], 2), random([2, 3, nk, 8], 3));
        let want = host_reference(&q, &k, &v, table, q_sizes, k_sizes);
        let got: Vec<f32> = attention(q, k, v, table).to_data().to_vec().unwrap();
        let err = got.iter().zip(&want).map(|(g, w)| (*g as f64 - w).abs()).fold(0.0, f64::max);
        assert!(err < 1e-5, "max abs error {err}");
    }

    #[test]
    fn block_causal_with_ragged_frames_matches_host_softmax() {
        let t = [3, 1, 4, 2, 5];
        let table = BlockTable::from_rules(&t, &t, |q| 0..((q / 2 + 1) * 2).min(5));
        check_against_host(&t, &t, &table);
    }

    #[test]
    fn non_adjacent_ranges_and_keyless_frames_match_host_softmax() {
        // Frame 2 sees nothing (zeros); frame 0 sees frames 0, 2, 4 (three ranges).
        let (qs, ks) = ([2, 3, 1, 2], [2, 1, 3, 2, 1, 2]);
        let rules: [&[usize]; 4] = [&[0, 2, 4], &[1, 2, 3, 5], &[], &[0, 1, 2, 3, 4, 5]];
        let table = BlockTable::from_rules(&qs, &ks, |q| rules[q].iter().copied());
        check_against_host(&qs, &ks, &table);
    }

    #[test]
    fn gradients_equal_a_per_frame_index_select_reference() {
        type A = Autodiff<NdArray>;
        let (qs, ks) = ([2, 3, 1], [1, 2, 2, 3]);
        let rules: [&[usize]; 3] = [&[0, 2], &[1, 2, 3], &[3]];
        let table = BlockTable::from_rules(&qs, &ks, |q| rules[q].iter().copied());
        let (nq, nk) = table.tokens();
        let dev = Default::default();
        let leaf = |t: Tensor<B, 4>| Tensor::<A, 4>::from_data(t.to_data(), &dev).require_grad();
        let (q, k, v) = (leaf(random([1, 2, nq, 4], 4)), leaf(random([1, 2, nk, 4], 5)), leaf(random([1, 2, nk, 4], 6)));
        let weights = Tensor::<A, 4>::from_data(random([1, 2, nq, 4], 7).to_data(), &dev);

        let grads = |out: Tensor<A, 4>| {
            let g = (out * weights.clone()).sum().backward();
            [&q, &k, &v].map(|t| t.grad(&g).unwrap().to_data().to_vec::<f32>().unwrap())
        };
        let got = grads(attention(q.clone(), k.clone(), v.clone(), &table));

        // Reference: per query frame, select its key tokens by index and attend unmasked.
        let k_offsets: Vec<usize> = ks.iter().scan(0, |a, s| Some(std::mem::replace(a, *a + s))).collect();
        let mut rows = Vec::new();
        let mut start = 0;
        for (f, &n) in qs.iter().enumerate() {
            let idx: Vec<i64> = rules[f].iter().flat_map(|&j| (k_offsets[j]..k_offsets[j] + ks[j]).map(|t| t as i64)).collect();
            let idx = Tensor::<A, 1, Int>::from_data(TensorData::new(idx.clone(), [idx.len()]), &dev);
            let qf = q.clone().narrow(2, start, n);
            let opts = AttentionModuleOptions::default();
            rows.push(burn_attention(qf, k.clone().select(2, idx.clone()), v.clone().select(2, idx), None, None, opts));
            start += n;
        }
        let want = grads(Tensor::cat(rows, 2));
        for (g, w) in got.iter().zip(&want) {
            let err = g.iter().zip(w).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max);
            assert!(err < 1e-5, "gradient differs by {err}");
        }
    }
}
