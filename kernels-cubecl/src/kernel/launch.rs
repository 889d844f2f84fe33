//! Host side of the CubeCL kernels: checks shapes, picks the tiles ([`Tiles::choose`]), finds the
//! tile plan on the device (built and uploaded once per block table, then cached), launches.
//!
//! q, k, v, the output and its gradient are read through their strides (no contiguous copies);
//! outputs and gradients are allocated contiguous.

use super::backward::{flash_backward, flash_backward_delta};
use super::forward::flash_forward;
use super::plan::TilePlan;
use super::tiles::{PLANE, Pass, Tiles};
use crate::BlockTable;
use burn::tensor::{DType, Shape};
use burn_cubecl::{CubeRuntime, kernel::into_contiguous, ops::numeric::empty_device_contiguous_dtype, tensor::CubeTensor};
use cubecl::features::AtomicUsage;
use cubecl::ir::{ElemType, FloatKind, StorageType, Type};
use cubecl::prelude::*;
use std::any::{Any, TypeId};
use std::sync::{Arc, Mutex};

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

/// A tile plan on a device.
struct Uploaded<R: CubeRuntime> {
    tiles: CubeTensor<R>,
    ranges: CubeTensor<R>,
    count: usize,
}

impl<R: CubeRuntime> Clone for Uploaded<R> {
    fn clone(&self) -> Self {
        Self { tiles: self.tiles.clone(), ranges: self.ranges.clone(), count: self.count }
    }
}

/// Which side of the table a plan tiles.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Side {
    Queries,
    Keys,
}

/// Plans on devices, newest last: (runtime, device, table, side, rows) → the uploaded plan.
/// Training and generation reuse a handful of tables for thousands of calls; the cache keeps the
/// last [`PLAN_CACHE`] so a long run of changing tables stays bounded.
type PlanKey = (TypeId, String, BlockTable, Side, usize);
static PLANS: Mutex<Vec<(PlanKey, Arc<dyn Any + Send + Sync>)>> = Mutex::new(Vec::new());
const PLAN_CACHE: usize = 64;

fn upload_u32<R: CubeRuntime>(like: &CubeTensor<R>, data: &[u32]) -> CubeTensor<R> {
    // A zero-sized binding is not portable; an unused element keeps the buffer valid.
    let data = if data.is_empty() { &[0u32, 0][..] } else { data };
    let bytes: Vec<u8> = data.iter().flat_map(|x| x.to_le_bytes()).collect();
    let handle = like.client.create_from_slice(&bytes);
    CubeTensor::new_contiguous(like.client.clone(), like.device.clone(), Shape::new([data.len()]), handle, DType::U32)
}

/// The plan of `table` tiled by `side` in tiles of `rows`, on `like`'s device (cached).
fn plan<R: CubeRuntime>(like: &CubeTensor<R>, table: &BlockTable, side: Side, rows: usize) -> Uploaded<R> {
    let key: PlanKey = (TypeId::of::<R>(), format!("{:?}", like.device), table.clone(), side, rows);
    let mut plans = PLANS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(found) = plans.iter().find(|(k, _)| *k == key).and_then(|(_, p)| p.downcast_ref::<Uploaded<R>>()) {
        return found.clone();
    }
    let flat = match side {
        Side::Queries => TilePlan::queries(table, rows),
        Side::Keys => TilePlan::keys(table, rows),
    };
    let uploaded = Uploaded { tiles: upload_u32(like, &flat.tiles), ranges: upload_u32(like, &flat.ranges), count: flat.tile_count() };
    if plans.len() == PLAN_CACHE {
        plans.remove(0);
    }
    plans.push((key, Arc::new(uploaded.clone())));
    uploaded
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
    assert!(qs[3] % 2 == 0 || qs[3] < PLANE, "attention kernel: head dim {} must be even", qs[3]);
    ([qs[0], qs[1], qs[2], qs[3]], ks[2])
}

fn tiles<R: CubeRuntime>(like: &CubeTensor<R>, pass: Pass, dim: usize) -> Tiles {
    Tiles::choose(like.client.properties(), pass, like.dtype.into(), dim)
}

fn cube_dim(t: &Tiles) -> CubeDim {
    CubeDim::new_2d(PLANE as u32, t.planes as u32)
}

/// Forward: output in the input dtype and f32 log-sum-exp.
pub fn forward<R: CubeRuntime>(q: CubeTensor<R>, k: CubeTensor<R>, v: CubeTensor<R>, table: &BlockTable) -> Forward<R> {
    let ([b, h, nq, d], _) = dims(&q, &k, &v, table);
    let dtype = q.dtype;
    let out = empty(&q, Shape::new([b, h, nq, d]), dtype);
    let lse = empty(&q, Shape::new([b, h, nq]), DType::F32);
    let t = tiles(&q, Pass::Forward, d);
    let plan = plan(&q, table, Side::Queries, t.rows());
    if plan.count > 0 && b * h > 0 {
        let client = q.client.clone();
        // SAFETY: every read is in bounds by construction: staged tokens are guarded by their
        // count, idle rows read a clamped valid row, and writes are guarded by the tile's rows and
        // the head dim; the plan's ranges lie within the table's tokens, checked against the
        // shapes in `dims`. So the kernel needs no bound checks (they cost registers and spills).
        unsafe {
            flash_forward::launch_unchecked::<R>(
                &client,
                CubeCount::Static(plan.count as u32, (b * h) as u32, 1),
                cube_dim(&t),
                q.into_tensor_arg(),
                k.into_tensor_arg(),
                v.into_tensor_arg(),
                plan.tiles.into_tensor_arg(),
                plan.ranges.into_tensor_arg(),
                out.clone().into_tensor_arg(),
                lse.clone().into_tensor_arg(),
                d,
                t.planes,
                t.cols,
                t.cmma,
                dtype.into(),
            )
        };
    }
    Forward { out, lse }
}

/// Whether the runtime adds f32 atomically (CUDA; wgpu where the adapter has float atomics, as
/// lavapipe does).
pub fn has_float_atomics<R: CubeRuntime>(client: &ComputeClient<R>) -> bool {
    let atomic = Type::new(StorageType::Atomic(ElemType::Float(FloatKind::F32)));
    client.properties().atomic_type_usage(atomic).contains(AtomicUsage::Add)
}

/// Backward from the forward's output and log-sum-exp and the output gradient `grad`.
///
/// # Panics
///
/// On a runtime without f32 atomic adds ([`has_float_atomics`]): FlashAttention-2 accumulates dQ
/// with them. Callers check first ([`crate::AttentionBackend::fused_backward_on`]) and take the
/// portable path.
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
    assert!(has_float_atomics(&q.client), "attention kernel: this runtime has no f32 atomic add for dQ");
    let lse = into_contiguous(lse);
    let dtype = q.dtype;
    let grad = burn_cubecl::kernel::cast(grad, dtype);
    let out = burn_cubecl::kernel::cast(out, dtype);
    let dk = empty(&q, Shape::new([b, h, nk, d]), dtype);
    let dv = empty(&q, Shape::new([b, h, nk, d]), dtype);
    let delta = empty(&q, Shape::new([b, h, nq]), DType::F32);
    let dq = empty(&q, Shape::new([b, h, nq, d]), DType::F32);
    let client = q.client.clone();
    if b * h == 0 {
        return Gradients { dq: burn_cubecl::kernel::cast(dq, dtype), dk, dv };
    }
    // SAFETY: as in `forward`; the delta kernel guards its row.
    unsafe {
        flash_backward_delta::launch_unchecked::<R>(
            &client,
            CubeCount::Static(nq.div_ceil(PLANE) as u32, (b * h) as u32, 1),
            CubeDim::new_1d(PLANE as u32),
            out.into_tensor_arg(),
            grad.clone().into_tensor_arg(),
            delta.clone().into_tensor_arg(),
            dq.clone().into_tensor_arg(),
            d,
            dtype.into(),
        )
    };
    let t = tiles(&q, Pass::Backward, d);
    let keys = plan(&q, table, Side::Keys, t.rows());
    if keys.count > 0 {
        // SAFETY: as in `forward`; dQ's atomic adds are guarded by the step's queries.
        unsafe {
            flash_backward::launch_unchecked::<R>(
                &client,
                CubeCount::Static(keys.count as u32, (b * h) as u32, 1),
                cube_dim(&t),
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
                dq.clone().into_tensor_arg(),
                d,
                t.planes,
                t.cols,
                t.cmma,
                t.shared_dk,
                dtype.into(),
            )
        };
    }
    Gradients { dq: burn_cubecl::kernel::cast(dq, dtype), dk, dv }
}
