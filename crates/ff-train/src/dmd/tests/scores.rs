//! Score windows (tiles, image heads), the score timestep, and the two losses against hand
//! computations.

use super::{host, tiny_config, tiny_vae};
use crate::TrainRng;
use crate::dmd::loss::{dmd_loss, flow_loss};
use crate::dmd::scores::{score_timestep, tiles, windows};
use burn::backend::{Autodiff, NdArray};
use burn::tensor::Tensor;

#[test]
fn tiles_cover_the_clip_within_the_window() {
    assert_eq!(tiles(81, 21), vec![0..21, 21..41, 41..61, 61..81], "the paper's four tiles");
    assert_eq!(tiles(12, 5), vec![0..5, 5..9, 9..12]);
    assert_eq!(tiles(21, 21), vec![0..21]);
    assert_eq!(tiles(22, 21), vec![0..21, 21..22]);
}

#[test]
fn later_tiles_get_the_re_encoded_last_frame_of_the_clean_prefix() {
    let vae = tiny_vae();
    let device = Default::default();
    let x0 = Tensor::<NdArray, 5>::from_data(TrainRng::new(4).normal_data(vec![1, 16, 6, 2, 2]), &device);
    let tiles = tiles(6, 3);
    let windows = windows(&vae, x0.clone(), &tiles).unwrap();
    let shapes: Vec<([usize; 5], usize)> = windows.iter().map(|(w, h)| (w.dims(), *h)).collect();
    assert_eq!(shapes, vec![([1, 16, 3, 2, 2], 0), ([1, 16, 3, 2, 2], 1), ([1, 16, 2, 2, 2], 1)]);
    for ((window, _), tile) in windows.iter().zip(&tiles).skip(1) {
        // The head: decode the whole prefix in one pass, take its last RGB frame, encode it alone.
        let rgb = vae.decode(vae.denormalize(x0.clone().narrow(2, 0, tile.start))).unwrap();
        assert_eq!(rgb.dims()[2], 1 + 4 * (tile.start - 1));
        let last = rgb.clone().narrow(2, rgb.dims()[2] - 1, 1).clamp(-1.0, 1.0);
        let head = vae.normalize(vae.encode_mean(last).unwrap());
        let got = window.clone().narrow(2, 0, 1);
        let err: f32 = (got - head).abs().max().into_scalar();
        assert!(err < 1e-4, "head of tile {tile:?} differs by {err}");
        let targets: f32 =
            (window.clone().narrow(2, 1, tile.len()) - x0.clone().narrow(2, tile.start, tile.len())).abs().max().into_scalar();
        assert_eq!(targets, 0.0, "the tile's targets follow its head");
    }
}

#[test]
fn score_timesteps_follow_the_clamped_shifted_draw() {
    let config = tiny_config();
    let mut rng = TrainRng::new(8);
    let ts: Vec<f64> = (0..4000).map(|_| score_timestep(&config, &mut rng)).collect();
    assert!(ts.iter().all(|t| (20.0..=980.0).contains(t)));
    let top = ts.iter().filter(|t| **t == 980.0).count() as f64 / ts.len() as f64;
    // Self-Forcing: u ≥ 0.908 maps to t ≥ 980 under shift 5, about 9.2% of draws.
    assert!((top - 0.092).abs() < 0.02, "{top}");
}

#[test]
fn dmd_loss_has_value_half_mean_g_squared_and_gradient_g_over_n() {
    type Ad = Autodiff<NdArray>;
    let device = Default::default();
    let mut rng = TrainRng::new(2);
    let x0 = Tensor::<Ad, 5>::from_data(rng.normal_data(vec![1, 2, 3, 2, 2]), &device).require_grad();
    let g = rng.normal_data(vec![1, 2, 3, 2, 2]);
    let loss = dmd_loss(x0.clone(), Tensor::from_data(g.clone(), &device));
    let g = g.to_vec::<f32>().unwrap();
    let n = g.len() as f32;
    let want = 0.5 * g.iter().map(|v| v * v).sum::<f32>() / n;
    assert!((loss.clone().into_scalar() - want).abs() < 1e-6);
    let grads = loss.backward();
    let got = host(x0.grad(&grads).unwrap());
    assert!(got.iter().zip(&g).all(|(a, b)| (a - b / n).abs() < 1e-7));
}

#[test]
fn critic_loss_leaves_the_head_out() {
    let device = Default::default();
    let mut rng = TrainRng::new(6);
    let mut t = |seed_shape: Vec<usize>| Tensor::<NdArray, 5>::from_data(rng.normal_data(seed_shape), &device);
    let (v, eps, x) = (t(vec![1, 2, 4, 2, 2]), t(vec![1, 2, 4, 2, 2]), t(vec![1, 2, 4, 2, 2]));
    let (sum, count) = flow_loss(v.clone(), eps.clone(), x.clone(), 1);
    assert_eq!(count, 2 * 3 * 4);
    let want: f32 = (v.clone() - (eps.clone() - x.clone())).narrow(2, 1, 3).square().sum().into_scalar();
    assert!((sum.into_scalar() - want).abs() < 1e-5);
    // Whatever the head frame predicts, the loss does not change.
    let moved = Tensor::cat(vec![v.clone().narrow(2, 0, 1) + 100.0, v.narrow(2, 1, 3)], 2);
    let (again, _) = flow_loss(moved, eps, x, 1);
    assert!((again.into_scalar() - want).abs() < 1e-5);
}

#[test]
fn the_dmd_loss_value_is_reduced_in_index_order() {
    // Flex sums ≥ 4M f32 elements with rayon, whose split depends on the scheduling: the logged
    // value differed in its last bits between identical runs. It is now ½·Σ g² / N summed on
    // the host in index order (f64), the same bits on every run and backend.
    type Ad = Autodiff<NdArray>;
    let device = Default::default();
    let mut rng = TrainRng::new(3);
    let shape = vec![1, 16, 9, 8, 8];
    let x0 = Tensor::<Ad, 5>::from_data(rng.normal_data(shape.clone()), &device).require_grad();
    let g = rng.normal_data(shape);
    let value = dmd_loss(x0, Tensor::from_data(g.clone(), &device)).into_scalar();
    let g = g.to_vec::<f32>().unwrap();
    let want = (0.5 * g.iter().map(|&v| f64::from(v) * f64::from(v)).sum::<f64>() / g.len() as f64) as f32;
    assert_eq!(value.to_bits(), want.to_bits(), "{value} against {want}");
}
