//! The vendored burn-flex (`vendor/burn-flex`, the CPU kernels' backend): its threaded strided
//! copies (`copy_planes`), its element-wise ops (threaded from 64 Ki elements) and its strided
//! binary ops of any rank (`apply_strided`) give NdArray's values bit for bit on random permuted
//! and sliced rank-4 views and per-frame broadcasts, and the same bits at 1 and 2 threads. A
//! stack of matrices times one shared matrix, which Flex folds into one product where the rows
//! allow, gives each matrix's own 2D product bit for bit.
#![cfg(feature = "flex")]

use burn::backend::{Flex, NdArray};
use burn::tensor::{Tensor, TensorData, backend::Backend};

/// A small deterministic generator for shapes and values.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((self.0 >> 33) % n as u64) as usize
    }
}

/// One view: `dims` values, permuted by `perm`, then the first `cut` entries of its last axis
/// dropped (a sliced, offset view).
struct Case {
    dims: [usize; 4],
    perm: [usize; 4],
    cut: usize,
    values: Vec<f32>,
}

fn cases() -> Vec<Case> {
    let mut rng = Lcg(11);
    let mut shapes = vec![
        // The attention's head split of the small preset: `[1, n, h, d]` → `[1, h, n, d]`.
        ([1, 560, 8, 64], [0, 2, 1, 3]),
        // Its merge back, and a batch of planes above one copy task.
        ([2, 8, 390, 64], [0, 2, 1, 3]),
        // A transpose of the last two axes (2D tiles with a strided inner axis).
        ([3, 5, 96, 130], [0, 1, 3, 2]),
    ];
    for _ in 0..6 {
        let dims = [1 + rng.below(3), 1 + rng.below(40), 1 + rng.below(60), 1 + rng.below(70)];
        let mut perm = [0, 1, 2, 3];
        for i in (1..4).rev() {
            perm.swap(i, rng.below(i + 1));
        }
        shapes.push((dims, perm));
    }
    shapes
        .into_iter()
        .map(|(dims, perm)| {
            let n = dims.iter().product::<usize>();
            let values = (0..n).map(|_| rng.below(1 << 20) as f32 / 4096.0 - 128.0).collect();
            Case { dims, perm, cut: usize::from(dims[perm[3]] > 1), values }
        })
        .collect()
}

/// The bits of the view made contiguous, and of it times a contiguous tensor, plus a shared row,
/// times a per-frame row.
fn run<B: Backend>(case: &Case) -> [Vec<u32>; 2] {
    let device = Default::default();
    let x = Tensor::<B, 4>::from_data(TensorData::new(case.values.clone(), case.dims), &device).permute(case.perm);
    let [a, b, c, d] = x.dims();
    let view = x.slice([0..a, 0..b, 0..c, case.cut..d]);
    let shape = [a, b, c, d - case.cut];
    let copy = view.clone().reshape([a * b * c * (d - case.cut)]);
    let scale = Tensor::<B, 4>::ones(shape, &device).mul_scalar(1.5);
    let row = (0..shape[3]).map(|j| j as f32 / 8.0).collect::<Vec<_>>();
    let row = Tensor::<B, 4>::from_data(TensorData::new(row, [1, 1, 1, shape[3]]), &device);
    // One modulation per `[a, b]` frame, broadcast over its `c` tokens (adaLN's shape).
    let frame = (0..a * b * shape[3]).map(|j| 1.0 + (j % 7) as f32 / 4.0).collect::<Vec<_>>();
    let frame = Tensor::<B, 4>::from_data(TensorData::new(frame, [a, b, 1, shape[3]]), &device);
    let mixed = (view.mul(scale) + row).mul(frame).reshape([a * b * c * (d - case.cut)]);
    [copy, mixed].map(|t| t.into_data().to_vec::<f32>().unwrap().iter().map(|v| v.to_bits()).collect())
}

#[test]
fn strided_copies_and_element_wise_ops_match_ndarray_at_one_and_two_threads() {
    for case in cases() {
        let want = run::<NdArray>(&case);
        for threads in [1, 2] {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            let got = pool.install(|| run::<Flex>(&case));
            assert!(
                got == want,
                "{:?} permuted {:?}, cut {}: Flex at {threads} threads differs from NdArray",
                case.dims,
                case.perm,
                case.cut
            );
        }
    }
}

/// `[a, b, m, k]` activations (permuted and sliced as `perm`, `cut` say) times a shared `[k, n]`
/// weight, or a per-`a` `[a, 1, k, n]` one (never folded): the batched product's bits and those of
/// each `[m, k]` matrix's own 2D product.
fn stacked(dims: [usize; 4], perm: [usize; 4], cut: usize, n: usize, shared: bool, seed: u64) -> [Vec<u32>; 2] {
    type B = Flex;
    let device = Default::default();
    let mut rng = Lcg(seed);
    let mut values = |len: usize| (0..len).map(|_| rng.below(1 << 20) as f32 / (1 << 19) as f32 - 1.0).collect::<Vec<_>>();
    let x = Tensor::<B, 4>::from_data(TensorData::new(values(dims.iter().product()), dims), &device).permute(perm);
    let [a, b, m, k] = x.dims();
    let x = x.slice([0..a, cut..b, 0..m, 0..k]);
    let w = Tensor::<B, 4>::from_data(
        TensorData::new(values(if shared { k * n } else { a * k * n }), [if shared { 1 } else { a }, 1, k, n]),
        &device,
    );
    let bits = |t: Tensor<B, 2>| t.into_data().to_vec::<f32>().unwrap().into_iter().map(f32::to_bits).collect::<Vec<_>>();
    let batched = bits(x.clone().matmul(w.clone()).reshape([a * (b - cut) * m, n]));
    let each = (0..a)
        .flat_map(|i| (cut..b).map(move |j| (i, j)))
        .flat_map(|(i, j)| {
            let xi = x.clone().slice([i..i + 1, j - cut..j - cut + 1, 0..m, 0..k]).reshape([m, k]);
            let wi = w.clone().slice([if shared { 0..1 } else { i..i + 1 }, 0..1, 0..k, 0..n]).reshape([k, n]);
            bits(xi.matmul(wi))
        })
        .collect();
    [batched, each]
}

#[test]
fn a_stack_times_a_shared_matrix_gives_each_matrixs_own_product() {
    let cases = [
        // The FFN's first and second linear on the small preset's `[1, frames, tokens, dim]`.
        ([1, 35, 16, 512], [0, 1, 2, 3], 0, 1536, true),
        ([1, 35, 16, 1536], [0, 1, 2, 3], 0, 512, true),
        // Several batch axes, a sliced batch axis (rows still at one stride).
        ([3, 5, 7, 33], [0, 1, 2, 3], 1, 20, true),
        // Rows not at one stride: tokens and frames swapped (not folded).
        ([2, 9, 6, 40], [0, 2, 1, 3], 0, 24, true),
        // One weight per batch entry (not folded).
        ([3, 4, 10, 16], [0, 1, 2, 3], 0, 12, false),
    ];
    for (seed, (dims, perm, cut, n, shared)) in cases.into_iter().enumerate() {
        for threads in [1, 2] {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            let [batched, each] = pool.install(|| stacked(dims, perm, cut, n, shared, seed as u64));
            assert!(
                batched == each,
                "{dims:?} permuted {perm:?}, cut {cut}, n {n}, shared {shared}: the stacked product differs at {threads} threads"
            );
        }
    }
}
