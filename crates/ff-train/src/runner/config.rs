//! The TOML config of a training run: run paths and devices at the top level, the engine's
//! hyper-parameters in `[train]` ([`TrainConfig`]) and the objective's in its own section (e.g.
//! `[sft]`). Every key has a default (the paper's values); a key the file does not give keeps
//! it (`ff_model::io::with_defaults`), and a key no component knows is an error naming it and
//! the known ones.
//!
//! ```toml
//! model_dir = "models/Wan2.1-T2V-1.3B"   # relative paths are relative to the working directory
//! data = "data/clips"
//! out = "runs/sft"
//! devices = "cuda:0,1,2,3"
//!
//! [train]
//! steps = 1800
//! batch = 128
//!
//! [sft]
//! latents = 81
//! ```

use crate::engine::TrainConfig;
use crate::{Result, TrainError};
use ff_model::ModelError;
use ff_model::io::with_defaults;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

/// The effective config of a run, saved in the run directory.
pub const CONFIG_FILE: &str = "config.toml";

/// Where a run reads and writes, and on which devices.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Paths {
    /// Model directory (the layout `generate` reads); its DiT initialises the run.
    pub model_dir: Option<PathBuf>,
    /// Latent-clip dataset (`encode-videos` output).
    pub data: Option<PathBuf>,
    /// Run directory: checkpoints, metrics, loss curve, effective config.
    pub out: Option<PathBuf>,
    /// `cpu`, `cuda:0,1,..` or `wgpu:0,..`: one data-parallel worker per device (read by the
    /// caller that picks the backend).
    pub devices: String,
}

impl Default for Paths {
    fn default() -> Self {
        Self { model_dir: None, data: None, out: None, devices: "cpu".into() }
    }
}

/// A parsed run config with the objective's config type `O` under section `section`.
#[derive(Debug, Clone, PartialEq)]
pub struct RunConfig<O> {
    /// The top-level keys: paths and devices.
    pub paths: Paths,
    /// `[train]`: the engine's hyper-parameters.
    pub train: TrainConfig,
    /// The name of the objective's section (`sft`, `dmd`, ...).
    pub section: &'static str,
    /// The objective's section.
    pub objective: O,
}

impl<O: Serialize + DeserializeOwned> RunConfig<O> {
    /// The defaults: no paths, CPU, the paper's hyper-parameters, `objective` in `section`.
    pub fn defaults(section: &'static str, objective: O) -> Self {
        Self { paths: Paths::default(), train: TrainConfig::new(), section, objective }
    }

    /// This config overlaid with the TOML `text` (from `origin`, which errors name).
    pub fn overlay(self, text: &str, origin: &Path) -> Result<Self> {
        let at = |message: String| TrainError::ConfigFile { origin: origin.to_path_buf(), message };
        let table: toml::Table = toml::from_str(text).map_err(|e| at(format!("invalid TOML: {e}")))?;
        let given = serde_json::to_value(table).map_err(|e| at(e.to_string()))?;
        let merged = with_defaults(self.to_value()?, given).map_err(|e| match e {
            ModelError::Config(message) => at(message),
            other => at(other.to_string()),
        })?;
        Self::from_value(merged, self.section).map_err(at)
    }

    /// This config overlaid with the TOML file at `path`.
    pub fn overlay_file(self, path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|source| TrainError::Io { path: path.to_path_buf(), source })?;
        self.overlay(&text, path)
    }

    /// The effective config as TOML (unset optional keys left out), as saved in the run.
    pub fn to_toml(&self) -> Result<String> {
        toml::to_string(&without_nulls(self.to_value()?)).map_err(|e| TrainError::Config(format!("the config as TOML: {e}")))
    }

    fn to_value(&self) -> Result<Value> {
        let json = |e: serde_json::Error| TrainError::Config(e.to_string());
        let Value::Object(mut top) = serde_json::to_value(&self.paths).map_err(json)? else {
            return Err(TrainError::Config("the run paths are not a table".into()));
        };
        top.insert("train".into(), serde_json::to_value(&self.train).map_err(json)?);
        top.insert(self.section.into(), serde_json::to_value(&self.objective).map_err(json)?);
        Ok(Value::Object(top))
    }

    /// The config in `value` (a table with every key); errors are `[section]: message`.
    fn from_value(value: Value, section: &'static str) -> std::result::Result<Self, String> {
        let Value::Object(mut top) = value else { return Err("the config is not a table".into()) };
        let mut take = |key: &str| top.remove(key).unwrap_or(Value::Null);
        let train = serde_json::from_value(take("train")).map_err(|e| format!("[train]: {e}"))?;
        let objective = serde_json::from_value(take(section)).map_err(|e| format!("[{section}]: {e}"))?;
        let paths = serde_json::from_value(Value::Object(top)).map_err(|e| format!("top-level keys: {e}"))?;
        Ok(Self { paths, train, section, objective })
    }
}

/// `value` without its null entries (TOML has no null: an unset optional key is left out).
fn without_nulls(value: Value) -> Value {
    match value {
        Value::Object(m) => {
            Value::Object(m.into_iter().filter(|(_, v)| !v.is_null()).map(|(k, v)| (k, without_nulls(v))).collect::<Map<_, _>>())
        }
        other => other,
    }
}
