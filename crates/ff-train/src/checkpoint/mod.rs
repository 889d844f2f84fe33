//! Checkpoints of a training run and exact resume.
//!
//! A run directory holds one folder per checkpoint, `RUN/step-NNNNNN/`:
//!
//! | file | content |
//! | --- | --- |
//! | `model.safetensors` | the trained parameters' current values (all parameters when `trainable = "all"`) |
//! | `ema.safetensors` | their exponential moving average, the weights `generate` uses |
//! | `optimizer.safetensors` | AdamW moments by module path (`<path>.first`, `<path>.second`, flattened); metadata `steps`: a JSON object of each parameter's update count |
//! | `state.json` | step, random stream, data cursor, dataset size, engine and DiT configs, the base DiT the frozen part comes from |
//!
//! The weight files use the DiT loader's layout (Wan keys, PyTorch `[out, in]` Linear weights,
//! role parameters under their module paths), so `WanDit::load_weights` reads them. Every file
//! is written atomically into `RUN/.step-NNNNNN.tmp/`, which is renamed to its final name only
//! when complete: a run killed during a save leaves the previous checkpoint as the latest
//! complete one, and the leftover temp folder is ignored (and replaced by the next save).
//! Resume restores every piece of state, so on NdArray a resumed run is bit-identical to one
//! that never stopped.
//!
//! A run that trains a plain module (every parameter, e.g. the codec) uses the same folders and
//! files with the module's own paths and config ([`save_module`], [`restore_module`]).

mod files;
mod identity;
mod inference;
mod module;
#[cfg(test)]
mod tests;
mod unmerge;

pub use files::{Stored, read_tensors, write_tensors, write_tensors_as};
pub use identity::base_identity;
pub use inference::{export_role, export_roles, load_dit, load_planner, merged_weights, write_role_model};
pub use module::{ModuleCheckpointState, load_module_ema, read_module_state, restore_module, save_module};
pub use unmerge::{UNMERGE_TOLERANCE, unmerge_roles};

use crate::data::{Cursor, Sampler};
use crate::engine::params::{params, set_trainable};
use crate::engine::{Ema, Moments, TrainConfig, Trainer};
use crate::rng::TrainRng;
use crate::{Result, TrainError};
use burn::module::AutodiffModule;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{Tensor, TensorData};
use ff_model::dit::dit_key_remap;
use ff_model::load::{CheckpointFiles, load_checkpoint};
use ff_model::{AttentionBackend, DitConfig};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::path::{Path, PathBuf};

/// The trained parameters' current values in a checkpoint folder.
pub const MODEL_FILE: &str = "model.safetensors";
/// Their exponential moving average (the weights inference uses).
pub const EMA_FILE: &str = "ema.safetensors";
/// The AdamW moments and per-parameter update counts.
pub const OPTIMIZER_FILE: &str = "optimizer.safetensors";
/// Everything but the tensors ([`CheckpointState`]).
pub const STATE_FILE: &str = "state.json";

/// `state.json`: everything but the tensors.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CheckpointState {
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
    /// The trained DiT's config.
    pub dit: DitConfig,
    /// The DiT checkpoint the untrained parameters come from; `None` when the weight files hold
    /// every parameter.
    pub base: Option<PathBuf>,
    /// The identity of `base`'s weights ([`base_identity`]), checked on resume ([`check_base`]);
    /// `None` in checkpoints written before it was recorded.
    #[serde(default)]
    pub base_identity: Option<String>,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> TrainError + '_ {
    move |source| TrainError::Io { path: path.to_path_buf(), source }
}

/// The folder name of the checkpoint after `step` steps.
pub fn folder_name(step: usize) -> String {
    format!("step-{step:06}")
}

/// The complete checkpoints of `run`, oldest first, as (step, folder).
pub fn list(run: &Path) -> Result<Vec<(usize, PathBuf)>> {
    if !run.is_dir() {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for entry in fs::read_dir(run).map_err(io(run))? {
        let path = entry.map_err(io(run))?.path();
        let step = path.file_name().and_then(|n| n.to_str()).and_then(|n| n.strip_prefix("step-")).and_then(|s| s.parse().ok());
        if let Some(step) = step.filter(|_| path.join(STATE_FILE).is_file()) {
            out.push((step, path));
        }
    }
    out.sort();
    Ok(out)
}

/// The newest complete checkpoint of `run`.
pub fn latest(run: &Path) -> Result<Option<PathBuf>> {
    Ok(list(run)?.pop().map(|(_, p)| p))
}

/// Saves `trainer` into `run/step-NNNNNN/` (see the module docs), then removes all but the
/// newest `keep_checkpoints` checkpoints. `base` is the DiT checkpoint the run started from
/// (recorded when the files do not hold every parameter). Returns the checkpoint folder.
pub fn save<B>(run: &Path, trainer: &Trainer<B>, base: Option<&Path>) -> Result<PathBuf>
where
    B: AutodiffBackend + AttentionBackend,
    B::InnerBackend: AttentionBackend,
{
    save_folder(run, trainer.step, trainer.config.keep_checkpoints, |dir| write_trainer(dir, trainer, base))
}

/// Writes a checkpoint folder atomically: `write` fills `run/.step-NNNNNN.tmp/` (it must write a
/// `state.json` there), which is renamed to `run/step-NNNNNN/`; then all but the newest `keep`
/// checkpoints are removed.
pub fn save_folder(run: &Path, step: usize, keep: usize, write: impl FnOnce(&Path) -> Result<()>) -> Result<PathBuf> {
    let name = folder_name(step);
    let (tmp, dir) = (run.join(format!(".{name}.tmp")), run.join(&name));
    if tmp.exists() {
        fs::remove_dir_all(&tmp).map_err(io(&tmp))?;
    }
    fs::create_dir_all(&tmp).map_err(io(&tmp))?;
    write(&tmp)?;
    files::sync_dir(&tmp)?;
    if dir.exists() {
        fs::remove_dir_all(&dir).map_err(io(&dir))?;
    }
    fs::rename(&tmp, &dir).map_err(io(&dir))?;
    files::sync_dir(run)?;
    let all = list(run)?;
    for (_, old) in &all[..all.len().saturating_sub(keep)] {
        fs::remove_dir_all(old).map_err(io(old))?;
    }
    Ok(dir)
}

/// Writes the files of `trainer` (weights, EMA, optimizer, `state.json`) into the existing
/// folder `dir`.
pub fn write_trainer<B>(dir: &Path, trainer: &Trainer<B>, base: Option<&Path>) -> Result<()>
where
    B: AutodiffBackend + AttentionBackend,
    B::InnerBackend: AttentionBackend,
{
    fs::create_dir_all(dir).map_err(io(dir))?;
    let trainable = trainer.config.trainable;
    let keep = |p: &str| trainable.contains(p);
    write_tensors(&dir.join(MODEL_FILE), trainer.model.valid().file_tensors(keep)?, HashMap::new())?;
    write_tensors(&dir.join(EMA_FILE), trainer.ema_model().file_tensors(keep)?, HashMap::new())?;
    let (tensors, steps) = optimizer_tensors(trainer.optimizer.state());
    write_tensors(&dir.join(OPTIMIZER_FILE), tensors, HashMap::from([(STEPS_KEY.to_string(), steps)]))?;
    let every_parameter = trainer.model.valid().file_tensors(|p| !trainable.contains(p))?.is_empty();
    let (base, base_identity) = match base.filter(|_| !every_parameter) {
        Some(b) => (Some(fs::canonicalize(b).map_err(io(b))?), Some(base_identity(b)?)),
        None => (None, None),
    };
    let state = CheckpointState {
        step: trainer.step,
        rng: trainer.rng.clone(),
        cursor: trainer.sampler.cursor(),
        clips: trainer.clips,
        train: trainer.config.clone(),
        dit: trainer.model.config().clone(),
        base,
        base_identity,
    };
    let json = serde_json::to_vec_pretty(&state).map_err(|e| TrainError::Checkpoint { path: dir.to_path_buf(), message: e.to_string() })?;
    ff_model::io::write_atomic(&dir.join(STATE_FILE), |w| std::io::Write::write_all(w, &json)).map_err(Into::into)
}

/// Reads `state.json` of a checkpoint folder.
pub fn read_state(dir: &Path) -> Result<CheckpointState> {
    let path = dir.join(STATE_FILE);
    let text = fs::read_to_string(&path).map_err(io(&path))?;
    serde_json::from_str(&text).map_err(|e| TrainError::Checkpoint { path, message: format!("invalid state: {e}") })
}

/// Checks that the checkpoint in `dir` was trained on the base weights `base` (the run's
/// [`Start::base`](crate::runner::Start::base)): by their recorded identity, or by path for a
/// checkpoint written before identities were recorded. A mismatch is an error naming both; a
/// checkpoint or a run without a base (every parameter in the files) has nothing to check.
pub fn check_base(dir: &Path, base: Option<&Path>) -> Result<()> {
    let state = read_state(dir)?;
    let (Some(recorded), Some(base)) = (&state.base, base) else { return Ok(()) };
    let (was, now) = match &state.base_identity {
        Some(id) => (id.clone(), base_identity(base)?),
        None => (recorded.display().to_string(), fs::canonicalize(base).map_err(io(base))?.display().to_string()),
    };
    if was == now {
        return Ok(());
    }
    Err(TrainError::Checkpoint {
        path: dir.join(STATE_FILE),
        message: format!(
            "trained on the base weights {} ({was}); this run's base is {} ({now}): resume with the model it started \
             from, or start a new run",
            recorded.display(),
            base.display()
        ),
    })
}

/// Restores the checkpoint in `dir` into `trainer` (built by [`Trainer::new`] over the same base
/// model and dataset): weights, EMA, optimizer moments, step, random stream and data cursor.
/// The checkpoint's seed keeps the data order; the other configuration values are `trainer`'s.
pub fn restore<B>(trainer: &mut Trainer<B>, dir: &Path) -> Result<()>
where
    B: AutodiffBackend + AttentionBackend,
    B::InnerBackend: AttentionBackend,
{
    let state = read_state(dir)?;
    let mismatch = |message: String| Err(TrainError::Checkpoint { path: dir.join(STATE_FILE), message });
    if &state.dit != trainer.model.config() {
        return mismatch(format!("made with DiT config {:?}, the model has {:?}", state.dit, trainer.model.config()));
    }
    let (c, t) = (&state.train, &trainer.config);
    if (c.trainable, c.lora_rank, c.lora_alpha, c.lora_shared) != (t.trainable, t.lora_rank, t.lora_alpha, t.lora_shared) {
        return mismatch(format!(
            "trained {:?} with LoRA rank {} alpha {} shared {}, the run is configured for {:?} with rank {} alpha {} shared {}",
            c.trainable, c.lora_rank, c.lora_alpha, c.lora_shared, t.trainable, t.lora_rank, t.lora_alpha, t.lora_shared
        ));
    }
    if state.clips != trainer.clips {
        return mismatch(format!("made over {} clips, the dataset has {}", state.clips, trainer.clips));
    }
    let trainable = t.trainable;
    let frozen = move |p: &str| !trainable.contains(p);
    let mut model = trainer.model.clone();
    load_checkpoint(&mut model, &CheckpointFiles::resolve(dir.join(MODEL_FILE))?, &dit_key_remap(), frozen)?;
    let mut ema = trainer.model.valid();
    load_checkpoint(&mut ema, &CheckpointFiles::resolve(dir.join(EMA_FILE))?, &dit_key_remap(), frozen)?;
    let device = trainer.devices[0].clone();
    let moments = read_moments::<B::InnerBackend>(&dir.join(OPTIMIZER_FILE), &device)?;

    trainer.model = set_trainable(model, |p| trainable.contains(p));
    trainer.ema = Ema::new(t.ema_decay, t.ema_warmup, params(&ema, |p| trainable.contains(p)));
    trainer.optimizer.set_state(moments);
    trainer.sampler = Sampler::resume(state.train.seed, state.clips, state.cursor);
    trainer.rng = state.rng;
    trainer.step = state.step;
    Ok(())
}

/// The optimizer file's metadata key: a JSON object `{path: update count}` (one ordered entry,
/// so the file's bytes do not depend on hash order).
const STEPS_KEY: &str = "steps";

fn optimizer_tensors<B: burn::tensor::backend::Backend>(state: &BTreeMap<String, Moments<B>>) -> (Vec<(String, TensorData)>, String) {
    let mut tensors = Vec::with_capacity(2 * state.len());
    let mut steps = BTreeMap::new();
    for (path, m) in state {
        tensors.push((format!("{path}.first"), m.first.clone().into_data()));
        tensors.push((format!("{path}.second"), m.second.clone().into_data()));
        steps.insert(path.as_str(), m.time);
    }
    (tensors, serde_json::json!(steps).to_string())
}

fn read_moments<B: burn::tensor::backend::Backend>(path: &Path, device: &B::Device) -> Result<BTreeMap<String, Moments<B>>> {
    let (mut tensors, metadata) = read_tensors(path)?;
    let bad = |message: String| TrainError::Checkpoint { path: path.to_path_buf(), message };
    let steps = metadata.get(STEPS_KEY).ok_or_else(|| bad(format!("no '{STEPS_KEY}' metadata")))?;
    let steps: BTreeMap<String, usize> = serde_json::from_str(steps).map_err(|e| bad(format!("metadata '{STEPS_KEY}': {e}")))?;
    let mut out = BTreeMap::new();
    for (param, time) in steps {
        let mut take = |part: &str| -> Result<Tensor<B, 1>> {
            let key = format!("{param}.{part}");
            let data = tensors.remove(&key).ok_or_else(|| bad(format!("no tensor '{key}'")))?;
            let n = data.num_elements();
            Ok(Tensor::from_data(TensorData::new(data.into_vec::<f32>().map_err(|e| bad(format!("{e:?}")))?, [n]), device))
        };
        out.insert(param.clone(), Moments { time, first: take("first")?, second: take("second")? });
    }
    if let Some(key) = tensors.keys().next() {
        return Err(bad(format!("tensor '{key}' belongs to no parameter listed in the metadata")));
    }
    Ok(out)
}
