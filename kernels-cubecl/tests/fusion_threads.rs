//! Workers building and differentiating graphs at once in one process, as the executors do (one
//! worker thread per stage, all on one device): device workers run the fused kernels forward and
//! backward under `Autodiff<Wgpu>` (Burn's fusion on: the kernels are custom ops of the fusion
//! stream), all on one `WgpuDevice`, while host workers run the reference (the blockwise path
//! under `Autodiff<NdArray>`). Every result must equal the reference computed beforehand on one
//! thread: the output within 1e-5, the gradients of q, k, v within 1e-4 (relative).
//!
//! Regression test of the fusion-backward flake (issue 48, item 2): the wrong gradients were the
//! reference's. Burn's autodiff (0.21) keeps all graphs of the process in one locator, and every
//! backward pass ends by freeing the unused roots of *every* graph. A merge could leave a node
//! pointing at an emptied graph, so the next op on it (the blockwise path's key gather) started a
//! graph cut off from its leaf, and `cat` dropped its inputs' reference counts before registering
//! its step: for the length of the copy that graph looked unused, another thread's backward pass
//! freed it, and a query group's share of dK was lost. Both are patched in `vendor/burn-autodiff`.
//! Before the patch this test failed in every run (docs/BENCHMARKS.md, block-sparse attention).
//! Run: `cargo test -p kernels-cubecl --features wgpu --test fusion_threads`.

#![cfg(feature = "wgpu")]

mod common;

use burn::backend::wgpu::WgpuDevice;
use burn::backend::{Autodiff, NdArray, Wgpu};
use burn::tensor::TensorData;
use common::{Inputs, Lcg, forward_backward, inputs, random_table, rel_err};
use kernels_cubecl::BlockTable;

/// Device workers and the cases each runs once.
const DEVICE_WORKERS: usize = 4;
const DEVICE_CASES: usize = 20;
/// Host workers, the cases each has and how many times it runs them in turn.
const HOST_WORKERS: usize = 4;
const HOST_CASES: usize = 25;
const HOST_PASSES: usize = 24;

struct Case {
    table: BlockTable,
    x: Inputs,
    /// Output and gradients of q, k, v from the reference, on this thread alone.
    want: [TensorData; 4],
}

/// Ragged tables of 3 query and 4 key frames: most have a group that sees several key ranges.
fn cases(seed: usize, count: usize) -> Vec<Case> {
    let mut rng = Lcg(1000 + seed as u64);
    (0..count)
        .map(|i| {
            let table = random_table(&mut rng, 3, 4, 20);
            let x = inputs(&table, 1, 2, 16, (seed * 1000 + i) as u64);
            let want = forward_backward::<Autodiff<NdArray>>(&table, &x, false, &Default::default());
            Case { table, x, want }
        })
        .collect()
}

/// "`who` case `i`: errors" when `got` differs from the case's reference.
fn check(who: &str, i: usize, case: &Case, got: [TensorData; 4]) -> Option<String> {
    let errs: Vec<f32> = got.iter().zip(&case.want).map(|(a, b)| rel_err(a, b)).collect();
    let wrong = errs[0] > 1e-5 || errs[1..].iter().any(|e| *e > 1e-4);
    wrong.then(|| format!("{who} case {i}: rel err of out, dq, dk, dv {errs:?}, groups {:?}", case.table.groups()))
}

#[test]
fn workers_sharing_one_device_match_the_reference() {
    let device_cases: Vec<Vec<Case>> = (0..DEVICE_WORKERS).map(|w| cases(w, DEVICE_CASES)).collect();
    let host_cases: Vec<Vec<Case>> = (0..HOST_WORKERS).map(|w| cases(DEVICE_WORKERS + w, HOST_CASES)).collect();
    let dev = WgpuDevice::default();
    let failures: Vec<String> = std::thread::scope(|s| {
        let dev = &dev;
        let device = device_cases.iter().enumerate().map(|(w, cases)| {
            s.spawn(move || {
                let run = |(i, c): (usize, &Case)| {
                    check(&format!("device worker {w}"), i, c, forward_backward::<Autodiff<Wgpu>>(&c.table, &c.x, true, dev))
                };
                cases.iter().enumerate().filter_map(run).collect::<Vec<_>>()
            })
        });
        let host = host_cases.iter().enumerate().map(|(w, cases)| {
            s.spawn(move || {
                let nd = Default::default();
                let run = |(i, c): (usize, &Case)| {
                    check(&format!("host worker {w}"), i, c, forward_backward::<Autodiff<NdArray>>(&c.table, &c.x, false, &nd))
                };
                cases.iter().enumerate().cycle().take(HOST_CASES * HOST_PASSES).filter_map(run).collect::<Vec<_>>()
            })
        });
        let workers: Vec<_> = device.chain(host).collect();
        workers.into_iter().flat_map(|h| h.join().expect("worker panicked")).collect()
    });
    assert!(failures.is_empty(), "{} results differ from the reference:\n{}", failures.len(), failures.join("\n"));
}
