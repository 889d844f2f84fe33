//! A training checkpoint as a model: the base DiT the run started from, the roles added, and the
//! EMA weights of the trained parameters over them (what `generate --dit RUN` serves with the
//! `flashforward` crate's `train` feature, and what later phases start from); and the export of a
//! student, its roles merged into two plain DiTs (as the paper serves them) in the format of
//! `ff_sched::student`.

use super::files::write_tensors;
use super::{EMA_FILE, latest, read_state};
use crate::{Result, TrainError};
use ff_model::dit::{Role, dit_key_remap};
use ff_model::load::{CheckpointFiles, checkpoint_keys, load_checkpoint};
use ff_model::{AttentionBackend, DitConfig, WanDit};
use ff_sched::student::{ROLE_FOLDERS, ROLE_WEIGHTS, exported_roles};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Writes the roles of `model` merged into plain DiTs as `dir/planner/` and `dir/renderer/`
/// (each file atomically); `model` must have roles.
pub fn export_roles<B: AttentionBackend>(model: &WanDit<B>, dir: &Path) -> Result<()> {
    ROLE_FOLDERS.iter().try_for_each(|(role, _)| export_role(model, *role, dir))
}

/// Writes role `role` of `model` merged into a plain DiT as `dir/planner/` or `dir/renderer/`
/// (atomically); `model` must have roles.
pub fn export_role<B: AttentionBackend>(model: &WanDit<B>, role: Role, dir: &Path) -> Result<()> {
    let checkpoint_error = |message: String| TrainError::Checkpoint { path: dir.to_path_buf(), message };
    if model.role_embedding.is_none() {
        return Err(checkpoint_error("the model to export has no planner/renderer roles".into()));
    }
    write_role_model(&model.merge(role), role, dir)
}

/// Writes the plain DiT `model` as role `role` of the student folder `dir` (`dir/planner/` or
/// `dir/renderer/`, atomically), e.g. a frozen planner beside a trained renderer.
pub fn write_role_model<B: AttentionBackend>(model: &WanDit<B>, role: Role, dir: &Path) -> Result<()> {
    let checkpoint_error = |message: String| TrainError::Checkpoint { path: dir.to_path_buf(), message };
    if model.role_embedding.is_some() {
        return Err(checkpoint_error(format!("the {role:?} model to write still has roles: merge it first")));
    }
    let Some((_, name)) = ROLE_FOLDERS.iter().find(|(r, _)| *r == role) else {
        return Err(checkpoint_error(format!("{role:?} is not an exported role (planner or renderer)")));
    };
    let folder = dir.join(name);
    std::fs::create_dir_all(&folder).map_err(|source| TrainError::Io { path: folder.clone(), source })?;
    let metadata = HashMap::from([("format".to_string(), "pt".to_string())]);
    write_tensors(&folder.join(ROLE_WEIGHTS), model.file_tensors(|_| true)?, metadata)
}

/// A planner as one plain DiT: an exported student's `planner/`, the merged planner role of a
/// run or checkpoint with roles (Phase 1 or 2), or plain DiT weights.
pub fn load_planner<B: AttentionBackend>(config: &DitConfig, path: &Path, device: &B::Device) -> Result<WanDit<B>> {
    if let Some([planner, _]) = exported_roles(path)? {
        return Ok(WanDit::load(config, &planner, device)?);
    }
    let model = load_dit::<B>(config, path, device)?;
    Ok(match model.role_embedding {
        Some(_) => model.merge(Role::Planner),
        None => model,
    })
}

/// The DiT at `path` on `device`: a run directory (its newest checkpoint), a checkpoint folder
/// (`state.json` beside the weights), or any DiT checkpoint `WanDit::load` reads. A training
/// checkpoint gives its EMA weights with the roles (merge them with `WanDit::merge`), or without
/// when its run trained a DiT without roles; its DiT config must equal `config`.
pub fn load_dit<B: AttentionBackend>(config: &DitConfig, path: &Path, device: &B::Device) -> Result<WanDit<B>> {
    let Some(dir) = checkpoint_folder(path)? else {
        return Ok(WanDit::load(config, path, device)?);
    };
    let state = read_state(&dir)?;
    if &state.dit != config {
        return Err(TrainError::Checkpoint {
            path: dir.join(super::STATE_FILE),
            message: format!("trained a DiT with config {:?}, but the model config is {:?}", state.dit, config),
        });
    }
    let model = match &state.base {
        Some(base) => WanDit::load(config, base, device).map_err(|e| TrainError::Checkpoint {
            path: dir.clone(),
            message: format!("cannot load the base DiT {} this checkpoint refers to: {e}", base.display()),
        })?,
        None => config.init(device),
    };
    // A run from a fresh DiT without roles (the small world's teacher) saved no role parameters.
    let files = CheckpointFiles::resolve(dir.join(EMA_FILE))?;
    let roles = state.base.is_some() || checkpoint_keys(&files)?.iter().any(|k| k == "role_embedding");
    let mut model = if roles { model.with_roles(&state.train.lora()) } else { model };
    let trainable = state.train.trainable;
    load_checkpoint(&mut model, &files, &dit_key_remap(), |p| !trainable.contains(p))?;
    Ok(model)
}

/// For a run or checkpoint folder, the weight file as large as one merged role model (the base
/// DiT, or the EMA weights when they hold every parameter), e.g. for a memory estimate; `None`
/// when `path` is neither.
pub fn merged_weights(path: &Path) -> Result<Option<PathBuf>> {
    let Some(dir) = checkpoint_folder(path)? else { return Ok(None) };
    Ok(Some(read_state(&dir)?.base.unwrap_or_else(|| dir.join(EMA_FILE))))
}

/// The checkpoint folder `path` names, if it names one.
fn checkpoint_folder(path: &Path) -> Result<Option<PathBuf>> {
    if !path.is_dir() {
        return Ok(None);
    }
    if path.join(super::STATE_FILE).is_file() {
        return Ok(Some(path.to_path_buf()));
    }
    latest(path)
}
