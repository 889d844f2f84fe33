//! The vendored burn-flex (`vendor/burn-flex`, the CPU kernels' backend): its threaded strided
//! copies (`copy_planes`), its element-wise ops (threaded from 64 Ki elements) and its strided
//! binary ops of any rank (`apply_strided`) give NdArray's values bit for bit on random permuted
//! and sliced rank-4 views and per-frame broadcasts, and the same bits at 1 and 2 threads.
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
