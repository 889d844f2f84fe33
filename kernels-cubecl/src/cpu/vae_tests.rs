//! The VAE kernels against independent references: the causal convolution against Burn's own
//! conv3d (NdArray's loop) on random shapes, paddings and kernels; the channel norm against the
//! formula in f64; both at one and two threads, and on Flex's borrowed and strided tensors.

use super::channel_norm::channel_norm;
use super::conv3d::{Conv3dDims, conv3d};
use burn::backend::NdArray;
use burn::tensor::backend::Backend;
use burn::tensor::module::conv3d as burn_conv3d;
use burn::tensor::ops::{ConvOptions, PadMode};
use burn::tensor::{Distribution, Tensor, TensorData};

type B = NdArray;

fn random(dims: [usize; 5], seed: u64) -> Vec<f32> {
    B::seed(&Default::default(), seed);
    Tensor::<B, 5>::random(dims, Distribution::Normal(0.0, 1.0), &Default::default()).into_data().to_vec().unwrap()
}

fn tensor<const N: usize>(values: &[f32], dims: [usize; N]) -> Tensor<B, N> {
    Tensor::from_data(TensorData::new(values.to_vec(), dims), &Default::default())
}

/// Burn's conv3d with the past-side time padding made explicit.
fn reference(x: &[f32], w: &[f32], bias: &[f32], dims: Conv3dDims) -> Vec<f32> {
    let [ph, pw] = dims.pad;
    let x = tensor(x, dims.input).pad([(dims.time_pad, 0), (0, 0), (0, 0)], PadMode::Constant(0.0));
    let options = ConvOptions::new([1, 1, 1], [0, ph, pw], [1, 1, 1], 1);
    burn_conv3d(x, tensor(w, dims.weight), Some(tensor(bias, [dims.weight[0]])), options).into_data().to_vec().unwrap()
}

fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).fold(0.0, |m, (x, y)| m.max((x - y).abs()))
}

/// The decoder's kernels (3×3×3 with a cached or zero past, 3×1×1 time, 1×1×1, 1×3×3 per
/// frame) and odd ones, on frames from 1×1 to 9×7.
fn cases() -> Vec<Conv3dDims> {
    let case = |input, weight, time_pad, pad| Conv3dDims { input, weight, time_pad, pad };
    vec![
        case([1, 3, 4, 5, 6], [4, 3, 3, 3, 3], 2, [1, 1]),
        case([2, 2, 3, 4, 4], [3, 2, 3, 3, 3], 0, [1, 1]),
        case([1, 4, 5, 3, 3], [8, 4, 3, 1, 1], 2, [0, 0]),
        case([2, 5, 2, 7, 9], [2, 5, 1, 1, 1], 0, [0, 0]),
        case([1, 2, 3, 9, 7], [3, 2, 1, 3, 3], 0, [1, 1]),
        case([1, 1, 1, 1, 1], [2, 1, 3, 3, 3], 2, [1, 1]),
        case([1, 2, 2, 2, 3], [1, 2, 2, 3, 2], 1, [2, 1]),
        // 40 output rows of 48 columns: several row blocks per frame
        case([1, 24, 2, 40, 48], [5, 24, 3, 3, 3], 2, [1, 1]),
    ]
}

#[test]
fn conv3d_matches_burns_conv3d() {
    for (i, dims) in cases().into_iter().enumerate() {
        let [cout, ..] = dims.weight;
        let (x, w, bias) =
            (random(dims.input, 3 * i as u64), random(dims.weight, 3 * i as u64 + 1), random([1, 1, 1, 1, cout], 3 * i as u64 + 2));
        let got = conv3d(&x, &w, &bias, dims);
        let want = reference(&x, &w, &bias, dims);
        assert_eq!(got.len(), dims.output().unwrap().iter().product::<usize>(), "case {i}");
        let err = max_abs_diff(&got, &want);
        assert!(err <= 1e-4, "case {i} {dims:?}: max |difference| {err}");
    }
}

#[test]
fn conv3d_rejects_a_kernel_larger_than_the_padded_input() {
    let dims = Conv3dDims { input: [1, 1, 1, 2, 2], weight: [1, 1, 3, 3, 3], time_pad: 0, pad: [1, 1] };
    assert_eq!(dims.output(), None);
    let channels = Conv3dDims { input: [1, 2, 3, 2, 2], weight: [1, 3, 1, 1, 1], time_pad: 0, pad: [0, 0] };
    assert_eq!(channels.output(), None);
}

/// `x / max(‖x‖, 1e-12) · √C · γ` (then SiLU) per position, in f64.
fn norm_reference(x: &[f32], gamma: &[f32], [b, c, s]: [usize; 3], silu: bool) -> Vec<f32> {
    let mut out = vec![0.0; x.len()];
    for clip in 0..b {
        for p in 0..s {
            let at = |ch: usize| (clip * c + ch) * s + p;
            let norm = (0..c).map(|ch| f64::from(x[at(ch)]).powi(2)).sum::<f64>().sqrt().max(1e-12);
            for (ch, g) in gamma.iter().enumerate() {
                let y = f64::from(x[at(ch)]) / norm * (c as f64).sqrt() * f64::from(*g);
                out[at(ch)] = (if silu { y / (1.0 + (-y).exp()) } else { y }) as f32;
            }
        }
    }
    out
}

#[test]
fn channel_norm_matches_the_formula() {
    for (i, dims) in [[1, 4, 37], [2, 3, 5000], [1, 1, 3], [3, 16, 64]].into_iter().enumerate() {
        let [b, c, s] = dims;
        let mut x = random([b, c, s, 1, 1], i as u64);
        // one position all zero: the 1e-12 floor keeps it at zero
        (0..c).for_each(|ch| x[ch * s] = 0.0);
        let gamma = random([1, 1, 1, 1, c], 100 + i as u64);
        for silu in [false, true] {
            let got = channel_norm(&x, &gamma, dims, silu);
            let err = max_abs_diff(&got, &norm_reference(&x, &gamma, dims, silu));
            assert!(err <= 1e-5, "case {i} silu {silu}: max |difference| {err}");
            assert!((0..c).all(|ch| got[ch * s] == 0.0), "case {i}: a zero position must stay zero");
        }
    }
}

#[test]
fn vae_kernels_are_bit_identical_at_one_and_two_threads() {
    let dims = cases()[7];
    let (x, w, bias) = (random(dims.input, 1), random(dims.weight, 2), random([1, 1, 1, 1, dims.weight[0]], 3));
    let norm_dims = [2, 24, 2 * 40 * 48 / 2];
    let run = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
        pool.install(|| {
            let conv = conv3d(&x, &w, &bias, dims);
            let norm = channel_norm(&x, &x[..24], norm_dims, true);
            [conv, norm].map(|v| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>())
        })
    };
    assert!(run(1) == run(2), "results differ between 1 and 2 threads");
}

#[cfg(feature = "flex")]
#[test]
fn flex_runs_the_vae_kernels_on_borrowed_and_strided_tensors() {
    use burn::backend::Flex;
    let dev = Default::default();
    let dims = cases()[0];
    let (x, w, bias) = (random(dims.input, 1), random(dims.weight, 2), random([1, 1, 1, 1, 4], 3));
    let flex = |v: &[f32], d: [usize; 5]| Tensor::<Flex, 5>::from_data(TensorData::new(v.to_vec(), d), &dev);
    let want = reference(&x, &w, &bias, dims);
    let run = |x: Tensor<Flex, 5>| {
        let bias = Tensor::<Flex, 1>::from_data(TensorData::new(bias.clone(), [4]), &dev);
        crate::causal_conv3d(x, flex(&w, dims.weight), bias, dims.time_pad, dims.pad).expect("Flex has the VAE kernels")
    };
    let values = |t: Tensor<Flex, 5>| t.into_data().to_vec::<f32>().unwrap();
    // row-major (read in place), then the same values behind a transposed layout (copied)
    let [b, c, t, h, wd] = dims.input;
    let strided = flex(&x, dims.input).swap_dims(3, 4).into_data().to_vec::<f32>().unwrap();
    let strided = flex(&strided, [b, c, t, wd, h]).swap_dims(3, 4);
    for (name, input) in [("row-major", flex(&x, dims.input)), ("strided", strided)] {
        let err = max_abs_diff(&values(run(input)), &want);
        assert!(err <= 1e-4, "{name}: max |difference| {err}");
    }
    let gamma = Tensor::<Flex, 1>::from_data(TensorData::new(vec![0.5, 1.0, 2.0], [3]), &dev);
    let norm = crate::channel_norm(flex(&x, dims.input), gamma, true).expect("Flex has the VAE kernels");
    let want = norm_reference(&x, &[0.5, 1.0, 2.0], [1, 3, 4 * 5 * 6], true);
    assert!(max_abs_diff(&values(norm), &want) <= 1e-5);
}
