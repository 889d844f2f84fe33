//! `flashforward.json`, written beside an exported student's role folders (`train dmd` writes
//! `RUN/transformer/`, see `ff_train::checkpoint::export_roles`): how `generate` runs the student
//! as it was trained when no flag says otherwise (its stage count and the rest of its contract,
//! its frame size), and which prompts it can draw.

use std::path::Path;

use anyhow::{Context, Result, bail};
use ff_sched::ContractConfig;
use serde::{Deserialize, Serialize};

use crate::video::write_atomic;

/// The manifest's file name inside the student's folder.
pub const MANIFEST_FILE: &str = "flashforward.json";

/// What a student was trained for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StudentManifest {
    /// The contract config of its training rollouts (`DmdConfig::contract_config`), and its
    /// planner sampler (`train combine`): the defaults of the contract flags; `latents` is
    /// replaced by the requested length. Fields a manifest lacks (added to the contract after it
    /// was written) take their defaults.
    #[serde(deserialize_with = "contract_with_defaults")]
    pub contract: ContractConfig,
    /// Frame height and width in pixels of its training clips (`--height` / `--width` default).
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
    /// The small world's when every caption parses as one of its prompts, else open.
    pub fn of_captions<'a>(mut captions: impl Iterator<Item = &'a str>) -> Self {
        match captions.all(|c| ff_world::Prompt::parse(c).is_ok()) {
            true => Self::SmallWorld,
            false => Self::Open,
        }
    }
}

/// A manifest's contract, the fields it lacks at their defaults.
fn contract_with_defaults<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<ContractConfig, D::Error> {
    use serde::de::Error;
    use serde_json::Value;
    let mut value = Value::deserialize(d)?;
    let latents = value.get("latents").and_then(Value::as_u64).ok_or_else(|| D::Error::custom("the contract has no `latents`"))?;
    let defaults = serde_json::to_value(ContractConfig::new(latents as usize)).map_err(D::Error::custom)?;
    if let (Value::Object(have), Value::Object(all)) = (&mut value, defaults) {
        for (key, default) in all {
            have.entry(key).or_insert(default);
        }
    }
    serde_json::from_value(value).map_err(D::Error::custom)
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
        let text = std::fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))?;
        let manifest: Self = serde_json::from_str(&text).with_context(|| format!("{}: not a student manifest", path.display()))?;
        Ok(Some(manifest))
    }

    /// Writes the manifest into the folder `dir` (atomically).
    pub fn write(&self, dir: &Path) -> Result<()> {
        write_atomic(&dir.join(MANIFEST_FILE), |w| Ok(serde_json::to_writer_pretty(w, self)?))
    }

    /// The text the student's text encoder reads for `prompt`: a small-world student reads the
    /// canonical caption of the parsed prompt ("a red circle bounces" reads "a red circle bounces
    /// on a black background", the wording of every training caption), an open one the prompt as
    /// given. Refuses a prompt outside the student's vocabulary, naming the unknown words and
    /// listing what the model knows, or one its domain never draws (`ff_world::Prompt::undrawn`).
    pub fn prompt_text(&self, prompt: &str) -> Result<String> {
        if self.vocabulary == Vocabulary::Open {
            return Ok(prompt.to_string());
        }
        let cannot = "this model was trained on the small world's captions only and cannot draw this prompt";
        let parsed = match ff_world::Prompt::parse(prompt) {
            Err(e) => bail!("{cannot}: {e}"),
            Ok(p) => p,
        };
        if let Some(why) = parsed.undrawn() {
            bail!("{cannot}: {why}");
        }
        Ok(parsed.caption())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn contract() -> ContractConfig {
        ff_train::dmd::DmdConfig::new().with_stages(3).with_anchor_stride(4).contract_config(21)
    }

    #[test]
    fn the_manifests_contract_is_the_training_rollouts() {
        let dmd = ff_train::dmd::DmdConfig::new().with_latents(21).with_stages(3).with_chunk(2).with_history(2).with_planner_context(4);
        let manifest = StudentManifest { contract: dmd.contract_config(81), frame_size: [64, 64], vocabulary: Vocabulary::SmallWorld };
        let ours = ff_sched::Contract::new(manifest.contract_at(21)).unwrap();
        let trained = dmd.contract().unwrap();
        assert_eq!((ours.anchors, ours.blocks, ours.chunks), (trained.anchors, trained.blocks, trained.chunks));
        assert_eq!((ours.timesteps, ours.config.history, ours.config.planner_context), (trained.timesteps, 2, 4));
    }

    #[test]
    fn small_world_students_refuse_prompts_outside_the_vocabulary() {
        let world = StudentManifest { contract: contract(), frame_size: [64, 64], vocabulary: Vocabulary::SmallWorld };
        let full = "a red circle bounces on a black background";
        assert_eq!(world.prompt_text(full).unwrap(), full);
        assert_eq!(world.prompt_text("A red ball bounces.").unwrap(), full, "the training captions' wording");
        let err = world.prompt_text("a purple dragon flies").unwrap_err().to_string();
        assert!(err.contains("unknown words 'dragon', 'flies'"), "{err}");
        for known in ["circle, square, triangle", "red, green, blue", "black, white, gray, dark blue", "moves left", "bounces"] {
            assert!(err.contains(known), "the message lists what the model knows ({known}): {err}");
        }
        let err = world.prompt_text("a blue circle moves right on a gray background").unwrap_err().to_string();
        assert!(err.contains("never draws blue on a gray background"), "{err}");
        let open = StudentManifest { vocabulary: Vocabulary::Open, ..world };
        assert_eq!(open.prompt_text("a purple dragon flies").unwrap(), "a purple dragon flies");
    }

    #[test]
    fn the_vocabulary_follows_the_training_captions() {
        let world = ["a red circle bounces on a black background", "a green square moves up on a gray gradient background"];
        assert_eq!(Vocabulary::of_captions(world.into_iter()), Vocabulary::SmallWorld);
        assert_eq!(Vocabulary::of_captions(world.into_iter().chain(["a fox runs in the snow"])), Vocabulary::Open);
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
        let dir = std::env::temp_dir().join(format!("ff-student-manifest-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        assert_eq!(StudentManifest::read(&dir).unwrap(), None);
        let manifest = StudentManifest { contract: contract(), frame_size: [64, 96], vocabulary: Vocabulary::SmallWorld };
        manifest.write(&dir).unwrap();
        let text = std::fs::read_to_string(dir.join(MANIFEST_FILE)).unwrap();
        assert!(text.contains("\"small-world\""), "{text}");
        assert_eq!(StudentManifest::read(&dir).unwrap(), Some(manifest));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
