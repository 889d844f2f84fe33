//! Executors with threads on: a random DiT on Flex (rayon-parallel gemm), wide enough that its
//! FFN matmuls (192 tokens × 128 × 512) take gemm's threaded path. Serial runs on 4 threads,
//! the wavefront's 4 workers on one thread each: the latents must still be bit-identical.

use super::*;
use crate::contract::{Contract, ContractConfig};
use crate::schedule::ScheduleKind;
use burn::backend::Flex;
use burn::tensor::{Distribution, Tensor};
use ff_model::dit::DitConfig;

type B = Flex;
const SIDE: usize = 16;

/// The video of `kind` on `placement`, run from inside a rayon pool of `threads` threads.
fn video(kind: ScheduleKind, placement: Placement, threads: usize) -> (Vec<f32>, Vec<usize>) {
    let dev = Default::default();
    let dit = DitConfig::new([1, 2, 2], 16, 16, 128, 512, 256, 24, 2, 2);
    let contract = Contract::new(ContractConfig::new(9)).unwrap();
    <B as burn::tensor::backend::Backend>::seed(&dev, 7);
    let model = dit.init::<B>(&dev);
    let text = Tensor::random([1, 6, dit.text_dim], Distribution::Normal(0.0, 1.0), &dev);
    let noise = NoiseSpec { seed: 3, channels: dit.in_channels, height: SIDE, width: SIDE };
    let runner = DitRunner::new(&model, text, &contract, noise);
    let graph = kind.build(&contract).unwrap();
    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
    pool.install(|| {
        // what each worker's pool gets inside this one
        let per_worker = worker_threads(placement.workers(), rayon::current_num_threads());
        let e = execute(&graph, &placement, vec![runner; placement.workers()]).unwrap();
        (Tensor::cat(e.outputs, 2).into_data().to_vec().unwrap(), per_worker)
    })
}

#[test]
fn executors_are_bit_identical_with_threaded_kernels() {
    let (want, serial_threads) = video(ScheduleKind::FlashForward, Placement::serial(), 4);
    assert_eq!(serial_threads, [4]);
    assert_eq!(want.len(), 16 * 9 * SIDE * SIDE);
    assert!(want.iter().all(|x| x.is_finite()));
    let (wavefront, threads) = video(ScheduleKind::FlashForward, Placement::wavefront(4), 4);
    assert_eq!(threads, [1, 1, 1, 1]);
    assert_eq!(wavefront, want);
    let (streaming, threads) = video(ScheduleKind::FlashForward, Placement::streaming(2), 4);
    assert_eq!(threads, [2, 1, 1]);
    assert_eq!(streaming, want);
}

#[test]
fn worker_threads_share_the_callers_threads() {
    assert_eq!(worker_threads(1, 2), [2]);
    assert_eq!(worker_threads(4, 2), [1, 1, 1, 1]);
    assert_eq!(worker_threads(5, 16), [4, 3, 3, 3, 3]);
    assert_eq!(worker_threads(3, 3), [1, 1, 1]);
}
