//! What a trained student is on disk, the format training writes and the pipeline reads: two
//! role folders of plain DiT weights and `flashforward.json`, the manifest that says how the
//! student runs as it was trained (its contract and frame size) and which prompts it can draw.
//!
//! | file | content |
//! | --- | --- |
//! | `planner/diffusion_pytorch_model.safetensors` | the planner role merged into a plain DiT, Wan keys |
//! | `renderer/diffusion_pytorch_model.safetensors` | the renderer role merged into a plain DiT, Wan keys |
//! | `config.json` | the DiT config both share |
//! | `flashforward.json` | [`StudentManifest`], written last: its presence marks a complete export |
//!
//! Each role folder is a plain DiT checkpoint any loader of Wan weights reads.

use std::path::{Path, PathBuf};

use ff_model::io::{with_defaults, write_atomic};
use ff_model::{AttentionBackend, DitConfig, Role, WanDit};
use serde::{Deserialize, Serialize};

use crate::{ContractConfig, Result, SchedError};

/// The manifest's file name inside the student's folder.
pub const MANIFEST_FILE: &str = "flashforward.json";
/// The role folders of an exported student and the role each holds.
pub const ROLE_FOLDERS: [(Role, &str); 2] = [(Role::Planner, "planner"), (Role::Renderer, "renderer")];
/// The weight file inside each role folder.
pub const ROLE_WEIGHTS: &str = "diffusion_pytorch_model.safetensors";

/// What a student was trained for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StudentManifest {
    /// The contract config of its training rollouts, and its planner sampler: the defaults of a
    /// request's contract; `latents` is replaced by the requested length. Fields a manifest lacks
    /// (added to the contract after it was written) take their defaults.
    #[serde(deserialize_with = "contract_with_defaults")]
    pub contract: ContractConfig,
    /// Frame height and width in pixels of its training clips.
    pub frame_size: [usize; 2],
    /// The words its prompts may use.
    pub vocabulary: Vocabulary,
}

/// The words a student's prompts may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Vocabulary {
    /// The small world's captions (`ff_world::vocab`): a prompt outside them is refused.
    SmallWorld,
    /// Any prompt.
    Open,
}

impl Vocabulary {
    /// The small world's when every caption is one of its prompts (`is_small_world`), else open.
    pub fn of_captions<'a>(mut captions: impl Iterator<Item = &'a str>, is_small_world: impl Fn(&str) -> bool) -> Self {
        match captions.all(is_small_world) {
            true => Self::SmallWorld,
            false => Self::Open,
        }
    }
}

/// A manifest's contract, the fields it lacks at their defaults ([`with_defaults`]).
fn contract_with_defaults<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<ContractConfig, D::Error> {
    use serde::de::Error;
    use serde_json::Value;
    let value = Value::deserialize(d)?;
    let latents = value.get("latents").and_then(Value::as_u64).ok_or_else(|| D::Error::custom("the contract has no `latents`"))?;
    let defaults = serde_json::to_value(ContractConfig::new(latents as usize)).map_err(D::Error::custom)?;
    let merged = with_defaults(defaults, value).map_err(D::Error::custom)?;
    serde_json::from_value(merged).map_err(D::Error::custom)
}

impl StudentManifest {
    /// Its training contract at `latents` frames.
    pub fn contract_at(&self, latents: usize) -> ContractConfig {
        ContractConfig { latents, ..self.contract.clone() }
    }

    /// The manifest of the DiT folder `dit`; `None` when it has none (a plain DiT, a training run,
    /// a Wan model).
    pub fn read(dit: &Path) -> Result<Option<Self>> {
        let path = dit.join(MANIFEST_FILE);
        if !path.is_file() {
            return Ok(None);
        }
        let text = std::fs::read_to_string(&path).map_err(|source| SchedError::Io { path: path.clone(), source })?;
        let manifest =
            serde_json::from_str(&text).map_err(|e| SchedError::Config(format!("{}: not a student manifest: {e}", path.display())))?;
        Ok(Some(manifest))
    }

    /// Writes the manifest into the folder `dir` (atomically).
    pub fn write(&self, dir: &Path) -> Result<()> {
        write_atomic(&dir.join(MANIFEST_FILE), |w| Ok(serde_json::to_writer_pretty(w, self)?))?;
        Ok(())
    }
}

/// The planner and renderer weight files when `path` is an exported student folder; an error
/// when it holds one role folder without the other.
pub fn exported_roles(path: &Path) -> Result<Option<[PathBuf; 2]>> {
    let files = ROLE_FOLDERS.map(|(_, folder)| path.join(folder).join(ROLE_WEIGHTS));
    match files.iter().filter(|f| f.is_file()).count() {
        0 => Ok(None),
        2 => Ok(Some(files)),
        _ => {
            let missing = files.iter().find(|f| !f.is_file()).expect("one of two is missing");
            Err(SchedError::Config(format!(
                "{}: an exported student needs both role folders: {} does not exist",
                path.display(),
                missing.display()
            )))
        }
    }
}

/// The planner and renderer models of the exported student folder `path` on `device`, `None`
/// when `path` is not one.
pub fn load_roles<B: AttentionBackend>(config: &DitConfig, path: &Path, device: &B::Device) -> Result<Option<[WanDit<B>; 2]>> {
    let Some([planner, renderer]) = exported_roles(path)? else { return Ok(None) };
    let load = |file: PathBuf| WanDit::load(config, &file, device).map_err(SchedError::File);
    Ok(Some([load(planner)?, load(renderer)?]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn contract() -> ContractConfig {
        ContractConfig::new(21).with_stages(3).with_anchor_stride(4)
    }

    #[test]
    fn the_vocabulary_follows_the_training_captions() {
        let world = ["a red circle bounces on a black background", "a green square moves up on a gray gradient background"];
        let known = |c: &str| c.ends_with("background");
        assert_eq!(Vocabulary::of_captions(world.into_iter(), known), Vocabulary::SmallWorld);
        assert_eq!(Vocabulary::of_captions(world.into_iter().chain(["a fox runs in the snow"]), known), Vocabulary::Open);
    }

    #[test]
    fn a_manifest_older_than_the_planner_sampler_reads_with_the_distilled_stages() {
        let old = r#"{"contract": {"latents": 81, "stages": 4, "anchor_stride": 10, "anchor_window": 3, "chunk": 3,
            "planner_block": 3, "history": 5, "planner_context": 18, "context_window": 21, "shift": 5.0, "use_anchors": true},
            "frame_size": [64, 64], "vocabulary": "small-world"}"#;
        let manifest: StudentManifest = serde_json::from_str(old).unwrap();
        assert_eq!((manifest.contract.planner_steps, manifest.contract.planner_guidance), (0, 1.0));
        assert_eq!(manifest.contract, ContractConfig::new(81));
        let sampler = old.replace("\"use_anchors\": true", "\"use_anchors\": true, \"planner_steps\": 50, \"planner_guidance\": 5.0");
        let manifest: StudentManifest = serde_json::from_str(&sampler).unwrap();
        assert_eq!((manifest.contract.planner_steps, manifest.contract.planner_guidance), (50, 5.0));
        let err = serde_json::from_str::<StudentManifest>(&old.replace("\"latents\": 81, ", "")).unwrap_err().to_string();
        assert!(err.contains("no `latents`"), "{err}");
    }

    #[test]
    fn the_manifest_round_trips_through_its_file() {
        let scratch = tempfile::tempdir().unwrap();
        let dir = scratch.path();
        assert_eq!(StudentManifest::read(dir).unwrap(), None);
        let manifest = StudentManifest { contract: contract(), frame_size: [64, 96], vocabulary: Vocabulary::SmallWorld };
        manifest.write(dir).unwrap();
        let text = std::fs::read_to_string(dir.join(MANIFEST_FILE)).unwrap();
        assert!(text.contains("\"small-world\""), "{text}");
        assert_eq!(StudentManifest::read(dir).unwrap(), Some(manifest));
    }
}
