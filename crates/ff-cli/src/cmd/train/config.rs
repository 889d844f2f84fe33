//! The TOML config of a training command: run paths and devices at the top level, the engine's
//! hyper-parameters in `[train]` ([`TrainConfig`]) and the objective's in its own section (e.g.
//! `[sft]`). Every key has a default (the paper's values), a key the file does not give keeps
//! it, and a key no component knows is an error naming it and the known ones.
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

use anyhow::{Context, Result, anyhow, bail};
use ff_train::engine::TrainConfig;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

/// Where a run reads and writes, and on which devices.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct Paths {
    /// Model directory (the layout `generate` reads); its DiT initialises the run.
    pub model_dir: Option<PathBuf>,
    /// Latent-clip dataset (`encode-videos` output).
    pub data: Option<PathBuf>,
    /// Run directory: checkpoints, metrics, loss curve, effective config.
    pub out: Option<PathBuf>,
    /// `cpu`, `cuda:0,1,..` or `wgpu:0,..`: one data-parallel worker per device.
    pub devices: String,
}

impl Default for Paths {
    fn default() -> Self {
        Self { model_dir: None, data: None, out: None, devices: "cpu".into() }
    }
}

/// The flags every `train` subcommand takes (each overrides its config key).
#[derive(Debug, Clone, clap::Args)]
pub struct RunFlags {
    /// Run directory: checkpoints (`step-NNNNNN/`), metrics.jsonl, loss.svg, config.toml, and what
    /// the phase exports when it finishes.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Optimizer steps of the whole run (`train.steps`).
    #[arg(long)]
    pub steps: Option<usize>,
    /// Seed of the run's weights, data order and noise (`train.seed`).
    #[arg(long)]
    pub seed: Option<u64>,
    /// TOML config: top-level paths and devices, `[train]` and the phase's section.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Continue the run in --out from its newest checkpoint.
    #[arg(long)]
    pub resume: bool,
    /// `cpu`, `cuda:0,1,..` or `wgpu:0,..`: one data-parallel worker per device.
    #[arg(long)]
    pub devices: Option<String>,
}

/// A parsed run config with the objective's config type `O` under section `section`.
#[derive(Debug, Clone, PartialEq)]
pub struct RunConfig<O> {
    pub paths: Paths,
    pub train: TrainConfig,
    pub section: &'static str,
    pub objective: O,
}

impl<O: Serialize + DeserializeOwned> RunConfig<O> {
    /// The defaults: no paths, CPU, the paper's hyper-parameters, `objective` in `section`.
    pub fn defaults(section: &'static str, objective: O) -> Self {
        Self { paths: Paths::default(), train: TrainConfig::new(), section, objective }
    }

    /// This config overlaid with the TOML `text` (from `origin`, for messages).
    pub fn overlay(self, text: &str, origin: &Path) -> Result<Self> {
        let table: toml::Table = toml::from_str(text).with_context(|| format!("{}: invalid TOML", origin.display()))?;
        let given = serde_json::to_value(table)?;
        let merged = overlay(self.to_value()?, given, "").with_context(|| format!("{}", origin.display()))?;
        Self::from_value(merged, self.section).with_context(|| format!("{}", origin.display()))
    }

    /// This config overlaid with the TOML file at `path`.
    pub fn overlay_file(self, path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).with_context(|| format!("cannot read the config {}", path.display()))?;
        self.overlay(&text, path)
    }

    /// This config overlaid with `--config` (on `--resume` without it: the run's saved config),
    /// then with the flags that are given: the shared ones and the phase's `model_dir` / `data`.
    pub fn with_flags(self, flags: &RunFlags, model_dir: &Option<PathBuf>, data: &Option<PathBuf>) -> Result<Self> {
        let saved = flags.out.as_ref().map(|o| o.join(super::run::CONFIG_FILE)).filter(|p| flags.resume && p.is_file());
        let mut config = match flags.config.as_ref().or(saved.as_ref()) {
            Some(file) => self.overlay_file(file)?,
            None => self,
        };
        let paths = &mut config.paths;
        for (key, value) in [(&mut paths.model_dir, model_dir), (&mut paths.data, data), (&mut paths.out, &flags.out)] {
            if value.is_some() {
                key.clone_from(value);
            }
        }
        if let Some(devices) = &flags.devices {
            paths.devices.clone_from(devices);
        }
        config.train.steps = flags.steps.unwrap_or(config.train.steps);
        config.train.seed = flags.seed.unwrap_or(config.train.seed);
        Ok(config)
    }

    /// The effective config as TOML (unset optional keys left out), as printed and saved.
    pub fn to_toml(&self) -> Result<String> {
        Ok(toml::to_string(&without_nulls(self.to_value()?))?)
    }

    fn to_value(&self) -> Result<Value> {
        let Value::Object(mut top) = serde_json::to_value(&self.paths)? else { bail!("the run paths are not a table") };
        top.insert("train".into(), serde_json::to_value(&self.train)?);
        top.insert(self.section.into(), serde_json::to_value(&self.objective)?);
        Ok(Value::Object(top))
    }

    fn from_value(value: Value, section: &'static str) -> Result<Self> {
        let Value::Object(mut top) = value else { bail!("the config is not a table") };
        let mut take = |key: &str| top.remove(key).unwrap_or(Value::Null);
        let train = serde_json::from_value(take("train")).context("[train]")?;
        let objective = serde_json::from_value(take(section)).with_context(|| format!("[{section}]"))?;
        let paths = serde_json::from_value(Value::Object(top)).context("top-level keys")?;
        Ok(Self { paths, train, section, objective })
    }
}

/// `given` over `defaults`: tables merge key by key, any other value replaces the default; a key
/// absent from the defaults' table is an error naming its dotted path.
fn overlay(defaults: Value, given: Value, at: &str) -> Result<Value> {
    match (defaults, given) {
        (Value::Object(mut d), Value::Object(g)) => {
            for (key, value) in g {
                let here = if at.is_empty() { key.clone() } else { format!("{at}.{key}") };
                let default = d.remove(&key).ok_or_else(|| {
                    let known: Vec<&String> = d.keys().collect();
                    let known = known.iter().map(|k| k.as_str()).collect::<Vec<_>>().join(", ");
                    let place = if at.is_empty() { "at the top level".to_string() } else { format!("in [{at}]") };
                    anyhow!("unknown key `{here}` {place} (known keys: {known})")
                })?;
                d.insert(key, overlay(default, value, &here)?);
            }
            Ok(Value::Object(d))
        }
        (_, given) => Ok(given),
    }
}

fn without_nulls(value: Value) -> Value {
    match value {
        Value::Object(m) => {
            Value::Object(m.into_iter().filter(|(_, v)| !v.is_null()).map(|(k, v)| (k, without_nulls(v))).collect::<Map<_, _>>())
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ff_train::engine::Trainable;
    use ff_train::flow::FlowMatchConfig;

    fn defaults() -> RunConfig<FlowMatchConfig> {
        RunConfig::defaults("sft", FlowMatchConfig::new())
    }

    #[test]
    fn keys_override_defaults_section_by_section() {
        let text = "data = \"clips\"\ndevices = \"cuda:0,1\"\n[train]\nsteps = 7\ntrainable = \"all\"\nlr = 2e-5\nlora_shared = true\n[sft]\nshift = 3.0\n";
        let c = defaults().overlay(text, Path::new("sft.toml")).unwrap();
        assert_eq!(c.paths.data, Some(PathBuf::from("clips")));
        assert_eq!((c.paths.devices.as_str(), c.paths.out.is_none()), ("cuda:0,1", true));
        assert_eq!((c.train.steps, c.train.trainable, c.train.lr), (7, Trainable::All, 2e-5));
        assert!(c.train.lora_shared);
        assert_eq!(c.train.batch, 128, "untouched keys keep the paper's default");
        assert_eq!(c.objective.shift, 3.0);
        // The printed effective config reads back to the same config.
        let again = defaults().overlay(&c.to_toml().unwrap(), Path::new("effective.toml")).unwrap();
        assert_eq!(again, c);
    }

    #[test]
    fn unknown_keys_and_bad_values_are_named() {
        let err = format!("{:#}", defaults().overlay("[train]\nstepz = 3\n", Path::new("a.toml")).unwrap_err());
        assert!(err.contains("a.toml") && err.contains("unknown key `train.stepz` in [train]") && err.contains("steps"), "{err}");
        let err = format!("{:#}", defaults().overlay("modeldir = \"x\"\n", Path::new("a.toml")).unwrap_err());
        assert!(err.contains("unknown key `modeldir` at the top level") && err.contains("model_dir"), "{err}");
        let err = format!("{:#}", defaults().overlay("[sft]\nshift = \"big\"\n", Path::new("a.toml")).unwrap_err());
        assert!(err.contains("[sft]"), "{err}");
        let err = format!("{:#}", defaults().overlay("[train\n", Path::new("a.toml")).unwrap_err());
        assert!(err.contains("a.toml: invalid TOML"), "{err}");
    }
}
