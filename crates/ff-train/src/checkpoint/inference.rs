//! Loading a training checkpoint for inference: the base DiT the run started from, the roles
//! added, and the EMA weights of the trained parameters over them (`generate --dit RUN`).

use super::{EMA_FILE, latest, read_state};
use crate::{Result, TrainError};
use ff_model::dit::dit_key_remap;
use ff_model::load::{CheckpointFiles, checkpoint_keys, load_checkpoint};
use ff_model::{AttentionBackend, DitConfig, WanDit};
use std::path::{Path, PathBuf};

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
/// when `path` is not a training checkpoint.
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
