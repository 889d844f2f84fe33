//! What a finished run leaves for `generate`: `RUN/transformer/`, the diffusers layout's DiT
//! folder that `generate --model-dir` reads (copy it into the model directory as `transformer/`,
//! or `teacher/` for the small world's teacher).
//!
//! * the teacher (`train teacher`): `config.json` and `diffusion_pytorch_model.safetensors`,
//!   the EMA weights;
//! * the student (`train dmd`): `config.json`, `planner/` and `renderer/` (its EMA roles merged
//!   into two plain DiTs, [`export_roles`]) and `flashforward.json` (what it was trained for, see
//!   `ff_sched::student`), written last: its presence marks a complete export.
//!
//! `config.json` uses Wan's field names, the weights Wan keys. The weights are loaded (and roles
//! merged) on the backend `B` and device the caller gives: the CLI's CPU backend.

use crate::Result;
use crate::checkpoint::{export_roles, load_dit, load_planner, write_role_model, write_tensors};
use ff_model::io::write_atomic;
use ff_model::{AttentionBackend, DitConfig, Role};
use ff_sched::student::StudentManifest;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The export folder inside the run directory.
pub const EXPORT_DIR: &str = "transformer";

/// Writes the newest checkpoint's EMA weights of the teacher run `run` into `run/transformer/`;
/// returns it.
pub fn export_teacher<B: AttentionBackend>(dit: &DitConfig, run: &Path, device: &B::Device) -> Result<PathBuf> {
    let _span = tracing::info_span!("export", run = %run.display()).entered();
    let model = load_dit::<B>(dit, run, device)?;
    let dir = run.join(EXPORT_DIR);
    write_dit_config(dit, &dir)?;
    let metadata = HashMap::from([("format".to_string(), "pt".to_string())]);
    write_tensors(&dir.join("diffusion_pytorch_model.safetensors"), model.file_tensors(|_| true)?, metadata)?;
    Ok(dir)
}

/// Writes the newest checkpoint of the Phase 2 run `run` (the student's EMA with its roles) into
/// `run/transformer/` as merged role models with `manifest`; returns it. `planner`: the frozen
/// planner the run rendered around (`[dmd] planner`), written as the student's planner.
pub fn export_student<B: AttentionBackend>(
    dit: &DitConfig,
    run: &Path,
    manifest: &StudentManifest,
    planner: Option<&Path>,
    device: &B::Device,
) -> Result<PathBuf> {
    let _span = tracing::info_span!("export", run = %run.display()).entered();
    let model = load_dit::<B>(dit, run, device)?;
    let dir = run.join(EXPORT_DIR);
    write_dit_config(dit, &dir)?;
    export_roles(&model, &dir)?;
    if let Some(planner) = planner {
        write_planner::<B>(dit, planner, &dir, device)?;
    }
    manifest.write(&dir)?;
    Ok(dir)
}

/// Writes the planner at `path` (a run or checkpoint with roles, e.g. Phase 1; an exported
/// student; plain DiT weights: [`load_planner`]) into `dir/planner/`.
pub fn write_planner<B: AttentionBackend>(dit: &DitConfig, path: &Path, dir: &Path, device: &B::Device) -> Result<()> {
    let model = load_planner::<B>(dit, path, device)?;
    write_role_model(&model, Role::Planner, dir)
}

/// Writes `dir/config.json` (creating `dir`).
fn write_dit_config(dit: &DitConfig, dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|source| crate::TrainError::Io { path: dir.to_path_buf(), source })?;
    let json = serde_json::json!({
        "_class_name": "WanModel",
        "model_type": "t2v",
        "patch_size": dit.patch_size,
        "in_dim": dit.in_channels,
        "out_dim": dit.out_channels,
        "dim": dit.dim,
        "ffn_dim": dit.ffn_dim,
        "freq_dim": dit.freq_dim,
        "text_dim": dit.text_dim,
        "text_len": dit.text_len,
        "num_heads": dit.num_heads,
        "num_layers": dit.num_layers,
        "eps": dit.eps,
        "rope_max_seq_len": dit.rope_max_positions,
        "qk_norm": true,
        "cross_attn_norm": true,
    });
    Ok(write_atomic(&dir.join("config.json"), |w| serde_json::to_writer_pretty(w, &json).map_err(Into::into))?)
}
