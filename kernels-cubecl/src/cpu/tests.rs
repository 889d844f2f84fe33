//! The CPU kernel against the portable blockwise path (forward and gradients under
//! `Autodiff<NdArray>`) on random shapes and tables, and its thread-count independence.

use super::Dims;
use crate::kernel::layouts::{chunk_table, packed_sft_table};
use crate::{BlockTable, attention, blockwise};
use burn::backend::{Autodiff, NdArray};
use burn::tensor::{Distribution, Tensor};

type B = NdArray;
type A = Autodiff<NdArray>;

/// A small deterministic generator for shapes and rules.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((self.0 >> 33) % n as u64) as usize
    }
}

/// Ragged frames (1..=max tokens, some single-token), each query frame allowed a random subset
/// of key frames (sometimes none, sometimes all).
fn random_table(rng: &mut Lcg, q_frames: usize, k_frames: usize, max_tokens: usize) -> BlockTable {
    let qs: Vec<usize> = (0..q_frames).map(|_| 1 + rng.below(max_tokens)).collect();
    let ks: Vec<usize> = (0..k_frames).map(|_| 1 + rng.below(max_tokens)).collect();
    let rules: Vec<Vec<usize>> = (0..q_frames)
        .map(|_| match rng.below(5) {
            0 => vec![],
            1 => (0..k_frames).collect(),
            _ => (0..k_frames).filter(|_| rng.below(2) == 0).collect(),
        })
        .collect();
    BlockTable::from_rules(&qs, &ks, |q| rules[q].clone())
}

fn random<T: burn::tensor::backend::Backend>(dims: [usize; 4], seed: u64) -> Tensor<T, 4> {
    T::seed(&Default::default(), seed);
    Tensor::random(dims, Distribution::Normal(0.0, 1.0), &Default::default())
}

/// max |a − b| / max |b|, the scale floored at 0.01: a query row with a single allowed key has
/// dq = 0 exactly on the reference path (a constant softmax) and ~1e-7 here.
fn rel_err(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    let scale = b.iter().fold(0.01f32, |m, x| m.max(x.abs()));
    a.iter().zip(b).fold(0.0f32, |m, (x, y)| m.max((x - y).abs())) / scale
}

fn values<T: burn::tensor::backend::Backend>(t: Tensor<T, 4>) -> Vec<f32> {
    t.into_data().to_vec().unwrap()
}

/// Tables of every kind the model builds, at small scale, with batch × heads and head dims.
/// One query frame of 300 tokens (three query tiles, the last not a multiple of 16 rows) over
/// 2,110 keys in two allowed ranges: several key tiles, partial ones, and three key slabs.
fn long_rows() -> BlockTable {
    BlockTable::from_rules(&[300], &[600, 10, 1500], |_| [0, 2])
}

fn cases() -> Vec<(BlockTable, [usize; 2], usize)> {
    let mut rng = Lcg(7);
    let mut cases = vec![
        (packed_sft_table(13, 5), [1, 2], 16),
        (chunk_table(6, 7), [2, 1], 8),
        (BlockTable::full(&[1; 4], &[1; 3]), [1, 3], 4),
        (long_rows(), [1, 1], 8),
    ];
    for i in 0..6 {
        let (q_frames, k_frames) = (1 + rng.below(6), 1 + rng.below(6));
        let table = random_table(&mut rng, q_frames, k_frames, 1 + 20 * (i % 3));
        cases.push((table, [1 + rng.below(2), 1 + rng.below(3)], [4, 8, 12, 16][rng.below(4)]));
    }
    cases
}

#[test]
fn forward_matches_the_blockwise_path_on_random_tables() {
    for (i, (table, [b, h], d)) in cases().into_iter().enumerate() {
        let (nq, nk) = table.tokens();
        let (q, k, v) = (random::<B>([b, h, nq, d], 1), random::<B>([b, h, nk, d], 2), random::<B>([b, h, nk, d], 3));
        let want = values(blockwise::attention(q.clone(), k.clone(), v.clone(), &table));
        let got = values(attention(q, k, v, &table));
        let err = rel_err(&got, &want);
        assert!(err <= 1e-5, "case {i}: relative error {err}");
    }
}

#[test]
fn gradients_match_the_blockwise_path_under_autodiff() {
    for (i, (table, [b, h], d)) in cases().into_iter().enumerate() {
        let (nq, nk) = table.tokens();
        let leaves =
            [random::<A>([b, h, nq, d], 4), random::<A>([b, h, nk, d], 5), random::<A>([b, h, nk, d], 6)].map(|t| t.require_grad());
        let weights = random::<A>([b, h, nq, d], 8);
        let grads = |out: Tensor<A, 4>| {
            let g = (out * weights.clone()).sum().backward();
            // an input no allowed pair reads has no gradient on the blockwise path: zeros
            leaves.clone().map(|t| t.grad(&g).map(values).unwrap_or_else(|| vec![0.0; t.shape().num_elements()]))
        };
        let [q, k, v] = leaves.clone();
        let want = grads(blockwise::attention(q.clone(), k.clone(), v.clone(), &table));
        let got = grads(attention(q, k, v, &table));
        for (name, (g, w)) in ["q", "k", "v"].iter().zip(got.iter().zip(&want)) {
            let err = rel_err(g, w);
            assert!(err <= 1e-4, "case {i}: d{name} relative error {err}");
        }
    }
}

#[test]
fn results_are_bit_identical_at_one_and_two_threads() {
    for table in [packed_sft_table(13, 9), long_rows()] {
        let (nq, nk) = table.tokens();
        let dims = Dims { bh: 3, q_tokens: nq, k_tokens: nk, head_dim: 16 };
        let host = |n: usize, seed: u64| values(random::<B>([1, dims.bh, n, dims.head_dim], seed));
        let (q, k, v, grad) = (host(nq, 1), host(nk, 2), host(nk, 3), host(nq, 4));
        let run = |threads: usize| {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            pool.install(|| {
                let (out, lse) = super::forward(&q, &k, &v, dims, &table);
                let grads = super::backward(&q, &k, &v, &out, &lse, &grad, dims, &table);
                [out, lse].into_iter().chain(grads).map(|x| x.iter().map(|f| f.to_bits()).collect::<Vec<_>>()).collect::<Vec<_>>()
            })
        };
        assert!(run(1) == run(2), "results differ between 1 and 2 threads ({nq} × {nk} tokens)");
    }
}

#[cfg(feature = "flex")]
#[test]
fn flex_runs_the_kernel_forward_and_backward() {
    use burn::backend::Flex;
    type F = Autodiff<Flex>;
    const { assert!(<F as crate::AttentionBackend>::FUSED_ATTENTION) };
    let table = packed_sft_table(13, 3);
    let (nq, nk) = table.tokens();
    let leaves = [random::<F>([1, 2, nq, 8], 1), random::<F>([1, 2, nk, 8], 2), random::<F>([1, 2, nk, 8], 3)].map(|t| t.require_grad());
    let run = |out: Tensor<F, 4>| {
        let g = out.clone().sum().backward();
        std::iter::once(values(out)).chain(leaves.iter().map(|t| values(t.grad(&g).unwrap()))).collect::<Vec<_>>()
    };
    let [q, k, v] = leaves.clone();
    let got = run(crate::kernel_attention(q.clone(), k.clone(), v.clone(), &table).expect("Flex has the CPU kernel"));
    let want = run(blockwise::attention(q, k, v, &table));
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        let err = rel_err(g, w);
        assert!(err <= 1e-4, "output/grad {i}: relative error {err}");
    }
}
