//! Checkpoints of a run that trains a plain module (the codec): the folder, files and atomic save
//! of the DiT's checkpoints, with every trainable parameter stored under its module path,
//! flattened (`encoder.conv_in.weight`: `[numel]`), and `state.json` recording the module's config
//! as JSON ([`ModuleCheckpointState`]). Resume restores weights, EMA, optimizer moments, step,
//! random stream and data cursor, so a resumed run is bit-identical to one that never stopped.

use super::{EMA_FILE, MODEL_FILE, OPTIMIZER_FILE, STATE_FILE, STEPS_KEY, io, optimizer_tensors, read_moments, save_folder, write_tensors};
use crate::data::{Cursor, Sampler};
use crate::engine::params::{ParamMap, assign, params, set_trainable};
use crate::engine::{Ema, TrainConfig, Trainer};
use crate::rng::TrainRng;
use crate::{Result, TrainError};
use burn::module::{AutodiffModule, Module};
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{Tensor, TensorData};
use ff_model::AttentionBackend;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// `state.json` of a plain-module checkpoint.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ModuleCheckpointState {
    /// Optimizer steps done.
    pub step: usize,
    /// The run's random stream, as after the last step.
    pub rng: TrainRng,
    /// Where the data sampler stands.
    pub cursor: Cursor,
    /// Clips in the dataset the cursor walks.
    pub clips: usize,
    #[serde(deserialize_with = "TrainConfig::deserialize_with_defaults")]
    /// The engine config of the run.
    pub train: TrainConfig,
    /// The module's config (e.g. a `WanVaeConfig`), compared on resume.
    pub model: serde_json::Value,
}

fn host<B: Backend>(map: &ParamMap<B>) -> Vec<(String, TensorData)> {
    map.iter().map(|(k, v)| (k.clone(), v.clone().into_data())).collect()
}

/// Saves `trainer` into `run/step-NNNNNN/`; `model_config` describes the module (it must equal
/// the one given to [`restore_module`]). Returns the checkpoint folder.
pub fn save_module<B, M>(run: &Path, trainer: &Trainer<B, M>, model_config: serde_json::Value) -> Result<PathBuf>
where
    B: AutodiffBackend + AttentionBackend,
    B::InnerBackend: AttentionBackend,
    M: AutodiffModule<B> + crate::engine::StepModule<B> + Send,
{
    let state = ModuleCheckpointState {
        step: trainer.step,
        rng: trainer.rng.clone(),
        cursor: trainer.sampler.cursor(),
        clips: trainer.clips,
        train: trainer.config.clone(),
        model: model_config,
    };
    save_folder(run, trainer.step, trainer.config.keep_checkpoints, |dir| {
        write_tensors(&dir.join(MODEL_FILE), host(&trainer.trainable_values()), HashMap::new())?;
        write_tensors(&dir.join(EMA_FILE), host(trainer.ema_values()), HashMap::new())?;
        let (tensors, steps) = optimizer_tensors(trainer.optimizer.state());
        write_tensors(&dir.join(OPTIMIZER_FILE), tensors, HashMap::from([(STEPS_KEY.to_string(), steps)]))?;
        let json =
            serde_json::to_vec_pretty(&state).map_err(|e| TrainError::Checkpoint { path: dir.to_path_buf(), message: e.to_string() })?;
        ff_model::io::write_atomic(&dir.join(STATE_FILE), |w| std::io::Write::write_all(w, &json)).map_err(Into::into)
    })
}

/// Reads `state.json` of a plain-module checkpoint folder.
pub fn read_module_state(dir: &Path) -> Result<ModuleCheckpointState> {
    let path = dir.join(STATE_FILE);
    let text = std::fs::read_to_string(&path).map_err(io(&path))?;
    serde_json::from_str(&text).map_err(|e| TrainError::Checkpoint { path, message: format!("invalid state: {e}") })
}

/// The flattened parameters of a weight file, checked against the trainable parameters
/// `expected` (same paths, same sizes), on `device`.
fn read_params<B: Backend>(path: &Path, expected: &ParamMap<B>, device: &B::Device) -> Result<ParamMap<B>> {
    let (tensors, _) = super::read_tensors(path)?;
    let bad = |message: String| TrainError::Checkpoint { path: path.to_path_buf(), message };
    if let Some(key) = tensors.keys().find(|k| !expected.contains_key(*k)) {
        return Err(bad(format!("tensor '{key}' is no trainable parameter of the model")));
    }
    let mut out = ParamMap::new();
    for (key, want) in expected {
        let data = tensors.get(key).ok_or_else(|| bad(format!("no tensor '{key}'")))?;
        let n = want.dims()[0];
        if data.num_elements() != n {
            return Err(bad(format!("tensor '{key}' has {} values, the parameter {n}", data.num_elements())));
        }
        let values = data.clone().into_vec::<f32>().map_err(|e| bad(format!("tensor '{key}': {e:?}")))?;
        out.insert(key.clone(), Tensor::from_data(TensorData::new(values, [n]), device));
    }
    Ok(out)
}

/// `module` with the EMA weights of the plain-module checkpoint in `dir` (every parameter the run
/// trained; the others keep their values), e.g. to export a codec from a run.
pub fn load_module_ema<B: Backend, M: Module<B>>(module: M, dir: &Path) -> Result<M> {
    let state = read_module_state(dir)?;
    let trainable = state.train.trainable;
    let expected = params(&module, |p| trainable.contains(p));
    let Some(device) = expected.values().next().map(|t| t.device()) else { return Ok(module) };
    let ema = read_params::<B>(&dir.join(EMA_FILE), &expected, &device)?;
    Ok(assign(module, ema))
}

/// Restores the checkpoint in `dir` into `trainer` (built by [`Trainer::for_module`] over a
/// module with config `model_config` and the same dataset size).
pub fn restore_module<B, M>(trainer: &mut Trainer<B, M>, dir: &Path, model_config: &serde_json::Value) -> Result<()>
where
    B: AutodiffBackend + AttentionBackend,
    B::InnerBackend: AttentionBackend,
    M: AutodiffModule<B> + crate::engine::StepModule<B> + Send,
{
    let state = read_module_state(dir)?;
    let mismatch = |message: String| Err(TrainError::Checkpoint { path: dir.join(STATE_FILE), message });
    if &state.model != model_config {
        return mismatch(format!("made with model config {}, the model has {model_config}", state.model));
    }
    if state.train.trainable != trainer.config.trainable {
        return mismatch(format!("trained {:?}, the run is configured for {:?}", state.train.trainable, trainer.config.trainable));
    }
    if state.clips != trainer.clips {
        return mismatch(format!("made over {} clips, the dataset has {}", state.clips, trainer.clips));
    }
    let device = trainer.devices[0].clone();
    let expected = trainer.trainable_values();
    let weights = read_params::<B::InnerBackend>(&dir.join(MODEL_FILE), &expected, &device)?;
    let ema = read_params::<B::InnerBackend>(&dir.join(EMA_FILE), &expected, &device)?;
    let moments = read_moments::<B::InnerBackend>(&dir.join(OPTIMIZER_FILE), &device)?;

    let trainable = trainer.config.trainable;
    let weights = weights.into_iter().map(|(k, v)| (k, Tensor::from_inner(v))).collect();
    trainer.model = set_trainable(assign(trainer.model.clone(), weights), |p| trainable.contains(p));
    trainer.ema = Ema::new(trainer.config.ema_decay, trainer.config.ema_warmup, ema);
    trainer.optimizer.set_state(moments);
    trainer.sampler = Sampler::resume(state.train.seed, state.clips, state.cursor);
    trainer.rng = state.rng;
    trainer.step = state.step;
    Ok(())
}
