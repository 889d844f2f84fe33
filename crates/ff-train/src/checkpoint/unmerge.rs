//! An exported student back into one model with roles, so that a run continues training it
//! (Phase 2 from the shipped default model): the inverse of [`crate::checkpoint::export_roles`].
//!
//! An export holds `P = W + ΔP` and `R = W + ΔR` per adapted projection, where `ΔP` and `ΔR`
//! are the roles' adapters folded in (rank ≤ r each), and the role vectors added to the
//! time-embedding bias. `W` itself is not stored, and it need not be: any split with the same
//! two merged models serves the same student. This one takes
//!
//! * the backbone `W := R` (every parameter of the renderer model);
//! * the renderer's adapters fresh (`B = 0`, so the renderer role is `R` exactly) and its role
//!   vector zero;
//! * the planner's adapters from the SVD of `D = P − R` (`[in, out]`): the top `rank` triplets,
//!   `A = U·√(S/scale)` (`[in, rank]`), `B = √(S/scale)·Vᵀ` (`[rank, out]`), so that
//!   `scale·A·B` is `D`'s best rank-`rank` approximation; the planner's role vector is the
//!   difference of the two time-embedding biases.
//!
//! `P − R = ΔP − ΔR` has rank up to 2r, so a run continuing a rank-r student takes rank 2r to
//! be exact. Every other parameter must be equal in both models. A split whose truncation
//! changes a projection by more than [`UNMERGE_TOLERANCE`] of its norm is refused, naming it.

use crate::engine::params::{ParamMap, assign, params};
use crate::{Result, TrainError};
use burn::tensor::Tensor;
use burn::tensor::backend::Backend;
use ff_model::lora::LoraConfig;
use ff_model::{AttentionBackend, WanDit};
use nalgebra::DMatrix;
use std::path::Path;

/// Largest truncation error of a projection, relative to its merged weight's Frobenius norm
/// (f32 storage of the export rounds at about 1e-7).
pub const UNMERGE_TOLERANCE: f64 = 1e-4;

/// The parameter the role vectors are folded into by `WanDit::merge`.
const ROLE_BIAS: &str = "time_embedding.fc2.bias";

fn host<B: Backend>(t: &Tensor<B, 1>) -> Vec<f64> {
    t.to_data().convert::<f32>().to_vec::<f32>().expect("f32 data").into_iter().map(f64::from).collect()
}

fn tensor<B: Backend>(values: Vec<f64>, device: &B::Device) -> Tensor<B, 1> {
    let values: Vec<f32> = values.into_iter().map(|v| v as f32).collect();
    Tensor::from_floats(values.as_slice(), device)
}

/// One model with roles whose planner and renderer merge to `planner` and `renderer` (plain
/// DiTs of one config, e.g. the two folders of an export in `dir`, which errors name).
pub fn unmerge_roles<B: AttentionBackend>(planner: &WanDit<B>, renderer: WanDit<B>, lora: &LoraConfig, dir: &Path) -> Result<WanDit<B>> {
    let fail = |message: String| TrainError::Checkpoint { path: dir.to_path_buf(), message };
    if lora.shared {
        return Err(fail("a shared adapter cannot hold two roles' differences: unmerge with per-role adapters".into()));
    }
    if planner.role_embedding.is_some() || renderer.role_embedding.is_some() {
        return Err(fail("the role models must be plain merged DiTs (no roles)".into()));
    }
    let device = renderer.device();
    let planner_params = params(planner, |_| true);
    let renderer_params = params(&renderer, |_| true);
    let model = renderer.with_roles(lora);
    // The planner's adapters `A`, by module path: `[in, rank]`, flattened.
    let adapters = params(&model, |p| p.ends_with(".adapters.0.a"));
    let mut fitted = ParamMap::new();
    for (key, r) in &renderer_params {
        let p = planner_params.get(key).ok_or_else(|| fail(format!("the planner has no parameter {key}")))?;
        let (p, r) = (host(p), host(r));
        if p.len() != r.len() {
            return Err(fail(format!("{key}: {} values in the planner, {} in the renderer", p.len(), r.len())));
        }
        let diff: Vec<f64> = p.iter().zip(&r).map(|(p, r)| p - r).collect();
        if key == ROLE_BIAS {
            let dim = diff.len();
            let table = diff.into_iter().chain(std::iter::repeat_n(0.0, dim)).collect();
            fitted.insert("role_embedding".into(), tensor(table, &device));
        } else if let Some((prefix, adapter)) =
            key.strip_suffix(".base.weight").and_then(|prefix| Some((prefix, adapters.get(&format!("{prefix}.adapters.0.a"))?)))
        {
            let d_in = adapter.dims()[0] / lora.rank;
            let (a, b) = fit(&diff, d_in, lora, &p).map_err(|e| fail(format!("{key}: {e}")))?;
            fitted.insert(format!("{prefix}.adapters.0.a"), tensor(a, &device));
            fitted.insert(format!("{prefix}.adapters.0.b"), tensor(b, &device));
        } else if let Some(i) = diff.iter().position(|d| *d != 0.0) {
            return Err(fail(format!("{key} is not adapted but differs between the roles (at element {i})")));
        }
    }
    Ok(assign(model, fitted))
}

/// The planner adapter `(A, B)` (row-major `[in, rank]`, `[rank, out]`) of the difference
/// `diff` (row-major `[in, out]`) of the merged weight `merged`.
fn fit(diff: &[f64], d_in: usize, lora: &LoraConfig, merged: &[f64]) -> std::result::Result<(Vec<f64>, Vec<f64>), String> {
    let d_out = diff.len() / d_in;
    let scale = lora.alpha / lora.rank as f64;
    let svd = DMatrix::from_row_slice(d_in, d_out, diff).svd(true, true);
    let (u, v_t) = (svd.u.expect("computed"), svd.v_t.expect("computed"));
    let s = &svd.singular_values;
    let mut order: Vec<usize> = (0..s.len()).collect();
    order.sort_by(|&i, &j| s[j].total_cmp(&s[i]));
    let kept = lora.rank.min(s.len());
    let dropped: f64 = order[kept..].iter().map(|&i| s[i] * s[i]).sum::<f64>().sqrt();
    let norm = merged.iter().map(|w| w * w).sum::<f64>().sqrt().max(f64::MIN_POSITIVE);
    if dropped > UNMERGE_TOLERANCE * norm {
        return Err(format!(
            "the roles differ by more than rank {}: truncation error {:.2e} of the weight's norm (> {UNMERGE_TOLERANCE:e}); unmerge at a higher lora_rank",
            lora.rank,
            dropped / norm
        ));
    }
    let mut a = vec![0.0; d_in * lora.rank];
    let mut b = vec![0.0; lora.rank * d_out];
    for (j, &k) in order[..kept].iter().enumerate() {
        let root = (s[k] / scale).sqrt();
        for i in 0..d_in {
            a[i * lora.rank + j] = u[(i, k)] * root;
        }
        for o in 0..d_out {
            b[j * d_out + o] = v_t[(k, o)] * root;
        }
    }
    Ok((a, b))
}
