//! Host side of the CubeCL kernels: checks shapes, uploads the tile plans, launches.

use super::backward::{flash_backward_dkv, flash_backward_dq};
use super::forward::flash_forward;
use super::plan::TilePlan;
use crate::BlockTable;
use burn::tensor::{DType, Shape};
use burn_cubecl::{CubeRuntime, kernel::into_contiguous, ops::numeric::empty_device_contiguous_dtype, tensor::CubeTensor};
use cubecl::prelude::*;

/// Rows owned by one cube (one unit per row).
pub(super) const ROWS: usize = 32;

/// Rows staged through shared memory per step: `stage × dim ≤ 1024` f32, so the two staged
/// operands take 8 KiB (within WebGPU's 16 KiB workgroup-memory floor); at most [`ROWS`], since
/// the dK/dV kernel stages one row statistic per unit.
pub(super) fn stage(dim: usize) -> usize {
    (1024 / dim).clamp(1, ROWS)
}

/// Forward output and per-row log-sum-exp.
pub struct Forward<R: CubeRuntime> {
    /// `[batch, heads, q_tokens, dim]` in the inputs' dtype.
    pub out: CubeTensor<R>,
    /// `[batch, heads, q_tokens]` f32, natural log-sum-exp of the scaled scores.
    pub lse: CubeTensor<R>,
}

/// Gradients of q, k and v.
pub struct Gradients<R: CubeRuntime> {
    /// `[batch, heads, q_tokens, dim]`, like `q`.
    pub dq: CubeTensor<R>,
    /// `[batch, heads, k_tokens, dim]`, like `k`.
    pub dk: CubeTensor<R>,
    /// `[batch, heads, k_tokens, dim]`, like `v`.
    pub dv: CubeTensor<R>,
}

struct Uploaded<R: CubeRuntime> {
    tiles: CubeTensor<R>,
    ranges: CubeTensor<R>,
    count: usize,
}

fn upload_u32<R: CubeRuntime>(like: &CubeTensor<R>, data: &[u32]) -> CubeTensor<R> {
    // A zero-sized binding is not portable; an unused element keeps the buffer valid.
    let data = if data.is_empty() { &[0u32, 0][..] } else { data };
    let bytes: Vec<u8> = data.iter().flat_map(|x| x.to_le_bytes()).collect();
    let handle = like.client.create_from_slice(&bytes);
    CubeTensor::new_contiguous(like.client.clone(), like.device.clone(), Shape::new([data.len()]), handle, DType::U32)
}

fn upload<R: CubeRuntime>(like: &CubeTensor<R>, plan: &TilePlan) -> Uploaded<R> {
    Uploaded { tiles: upload_u32(like, &plan.tiles), ranges: upload_u32(like, &plan.ranges), count: plan.tile_count() }
}

fn empty<R: CubeRuntime>(like: &CubeTensor<R>, shape: Shape, dtype: DType) -> CubeTensor<R> {
    empty_device_contiguous_dtype(like.client.clone(), like.device.clone(), shape, dtype)
}

/// `[batch, heads, tokens, dim]` of q and k after checking them against each other and the table.
fn dims<R: CubeRuntime>(q: &CubeTensor<R>, k: &CubeTensor<R>, v: &CubeTensor<R>, table: &BlockTable) -> ([usize; 4], usize) {
    let (qs, ks, vs) = (q.meta.shape(), k.meta.shape(), v.meta.shape());
    assert!(qs.num_dims() == 4 && ks.num_dims() == 4, "attention kernel: q {qs:?}, k {ks:?} must be [batch, heads, tokens, dim]");
    assert!(ks == vs && qs[0] == ks[0] && qs[1] == ks[1] && qs[3] == ks[3], "attention kernel: q {qs:?}, k {ks:?}, v {vs:?} disagree");
    assert_eq!(table.tokens(), (qs[2], ks[2]), "attention kernel: block table tokens vs q {qs:?}, k {ks:?}");
    assert!(q.dtype == k.dtype && k.dtype == v.dtype, "attention kernel: dtypes {:?}, {:?}, {:?} differ", q.dtype, k.dtype, v.dtype);
    ([qs[0], qs[1], qs[2], qs[3]], ks[2])
}

/// Forward: output in the input dtype and f32 log-sum-exp.
pub fn forward<R: CubeRuntime>(q: CubeTensor<R>, k: CubeTensor<R>, v: CubeTensor<R>, table: &BlockTable) -> Forward<R> {
    let ([b, h, nq, d], _) = dims(&q, &k, &v, table);
    let (q, k, v) = (into_contiguous(q), into_contiguous(k), into_contiguous(v));
    let dtype = q.dtype;
    let out = empty(&q, Shape::new([b, h, nq, d]), dtype);
    let lse = empty(&q, Shape::new([b, h, nq]), DType::F32);
    let plan = upload(&q, &TilePlan::queries(table, ROWS));
    if plan.count > 0 && b * h > 0 {
        let client = q.client.clone();
        flash_forward::launch::<R>(
            &client,
            CubeCount::Static(plan.count as u32, (b * h) as u32, 1),
            CubeDim::new_1d(ROWS as u32),
            q.into_tensor_arg(),
            k.into_tensor_arg(),
            v.into_tensor_arg(),
            plan.tiles.into_tensor_arg(),
            plan.ranges.into_tensor_arg(),
            out.clone().into_tensor_arg(),
            lse.clone().into_tensor_arg(),
            d,
            stage(d),
            ROWS,
            dtype.into(),
        );
    }
    Forward { out, lse }
}

/// Backward from the forward's output and log-sum-exp and the output gradient `grad`.
#[allow(clippy::too_many_arguments)]
pub fn backward<R: CubeRuntime>(
    q: CubeTensor<R>,
    k: CubeTensor<R>,
    v: CubeTensor<R>,
    out: CubeTensor<R>,
    lse: CubeTensor<R>,
    grad: CubeTensor<R>,
    table: &BlockTable,
) -> Gradients<R> {
    let ([b, h, nq, d], nk) = dims(&q, &k, &v, table);
    let (q, k, v) = (into_contiguous(q), into_contiguous(k), into_contiguous(v));
    let (out, lse) = (into_contiguous(out), into_contiguous(lse));
    let grad = into_contiguous(burn_cubecl::kernel::cast(grad, q.dtype));
    let dtype = q.dtype;
    let dq = empty(&q, Shape::new([b, h, nq, d]), dtype);
    let dk = empty(&q, Shape::new([b, h, nk, d]), dtype);
    let dv = empty(&q, Shape::new([b, h, nk, d]), dtype);
    let delta = empty(&q, Shape::new([b, h, nq]), DType::F32);
    let client = q.client.clone();
    let queries = upload(&q, &TilePlan::queries(table, ROWS));
    if queries.count > 0 && b * h > 0 {
        flash_backward_dq::launch::<R>(
            &client,
            CubeCount::Static(queries.count as u32, (b * h) as u32, 1),
            CubeDim::new_1d(ROWS as u32),
            q.clone().into_tensor_arg(),
            k.clone().into_tensor_arg(),
            v.clone().into_tensor_arg(),
            out.into_tensor_arg(),
            grad.clone().into_tensor_arg(),
            lse.clone().into_tensor_arg(),
            queries.tiles.into_tensor_arg(),
            queries.ranges.into_tensor_arg(),
            dq.clone().into_tensor_arg(),
            delta.clone().into_tensor_arg(),
            d,
            stage(d),
            ROWS,
            dtype.into(),
        );
    }
    let keys = upload(&q, &TilePlan::keys(table, ROWS));
    if keys.count > 0 && b * h > 0 {
        flash_backward_dkv::launch::<R>(
            &client,
            CubeCount::Static(keys.count as u32, (b * h) as u32, 1),
            CubeDim::new_1d(ROWS as u32),
            q.into_tensor_arg(),
            k.into_tensor_arg(),
            v.into_tensor_arg(),
            grad.into_tensor_arg(),
            lse.into_tensor_arg(),
            delta.into_tensor_arg(),
            keys.tiles.into_tensor_arg(),
            keys.ranges.into_tensor_arg(),
            dk.clone().into_tensor_arg(),
            dv.clone().into_tensor_arg(),
            d,
            stage(d),
            ROWS,
            dtype.into(),
        );
    }
    Gradients { dq, dk, dv }
}
