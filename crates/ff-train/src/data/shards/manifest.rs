//! [`Manifest`]: the JSON index of a latent-clip dataset (format in the parent module's docs).

use std::collections::HashSet;
use std::fs;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::{Result, TrainError};

/// File name of the manifest in a dataset directory.
pub const MANIFEST: &str = "manifest.json";
/// Format tag and version of the manifest.
pub const FORMAT: &str = "flashforward-latent-clips/1";

/// The models that made a dataset's tensors (free-form identifiers, compared on resume).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Encoders {
    /// The VAE that encoded the latents.
    pub vae: String,
    /// The text encoder that embedded the prompts.
    pub text: String,
}

/// One clip of the dataset and where its tensors are.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClipEntry {
    /// The video's path relative to the videos directory.
    pub source: String,
    /// The clip's caption.
    pub caption: String,
    /// Latent frames L.
    pub latents: usize,
    /// `[height, width]` of the encoded frames in pixels.
    pub frame_size: [usize; 2],
    /// Shard file name in the dataset directory.
    pub shard: String,
    /// Name of the latents tensor in the shard.
    pub latents_key: String,
    /// `[channels, L, h, w]`.
    pub latents_shape: Vec<usize>,
    /// Name of the prompt-embedding tensor in the shard.
    pub prompt_key: String,
    /// `[tokens, text_dim]`.
    pub prompt_shape: Vec<usize>,
    /// Name of the crop-latents tensor in the shard; absent in datasets without crops.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crops_key: Option<String>,
    /// `[K, channels, L_c, h, w]` with `K + L_c = L` (crop `k` starts at clip latent `k + 1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crops_shape: Option<Vec<usize>>,
}

/// Whether crops of shape `crops` fit latents of shape `latents` (`[C, L, h, w]`): `[L − L_c, C,
/// L_c, h, w]` with `L_c ≥ 1`.
pub(super) fn crops_fit(crops: &[usize], latents: &[usize]) -> bool {
    matches!((crops, latents), ([k, c, lc, h, w], [c2, l, h2, w2]) if k + lc == *l && *lc > 0 && (c, h, w) == (c2, h2, w2))
}

/// The manifest of a dataset directory.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// Format tag and version ([`FORMAT`]).
    pub format: String,
    /// The models that made the tensors.
    pub encoders: Encoders,
    /// Every clip, in index order.
    pub clips: Vec<ClipEntry>,
}

impl Manifest {
    /// An empty manifest of the current format.
    pub fn new(encoders: Encoders) -> Self {
        Self { format: FORMAT.into(), encoders, clips: Vec::new() }
    }

    /// Reads and checks `dir/manifest.json`.
    pub fn load(dir: &Path) -> Result<Self> {
        let path = dir.join(MANIFEST);
        let bytes = fs::read(&path).map_err(|source| TrainError::Io { path: path.clone(), source })?;
        let manifest: Self =
            serde_json::from_slice(&bytes).map_err(|e| TrainError::Manifest { manifest: path.clone(), message: e.to_string() })?;
        manifest.check().map_err(|message| TrainError::Manifest { manifest: path, message })?;
        Ok(manifest)
    }

    /// Writes `dir/manifest.json` atomically.
    pub fn save(&self, dir: &Path) -> Result<()> {
        let mut bytes = serde_json::to_vec_pretty(self).expect("a manifest serialises");
        bytes.push(b'\n');
        ff_model::io::write_atomic(&dir.join(MANIFEST), |w| std::io::Write::write_all(w, &bytes)).map_err(Into::into)
    }

    /// The format tag, and each entry consistent in itself: L in the latents shape, a prompt
    /// shape of rank 2, crops (when present) that fit the latents, a shard that is a plain file
    /// name, keys used once.
    fn check(&self) -> std::result::Result<(), String> {
        if self.format != FORMAT {
            return Err(format!("format is {:?}, expected {FORMAT:?}", self.format));
        }
        let mut keys = HashSet::new();
        for (i, clip) in self.clips.iter().enumerate() {
            let at = format!("clip {i} ({})", clip.source);
            if clip.latents_shape.len() != 4 || clip.latents_shape[1] != clip.latents {
                return Err(format!("{at}: latents_shape {:?} is not [channels, {}, h, w]", clip.latents_shape, clip.latents));
            }
            if clip.prompt_shape.len() != 2 {
                return Err(format!("{at}: prompt_shape {:?} is not [tokens, text_dim]", clip.prompt_shape));
            }
            if Path::new(&clip.shard).file_name().is_none_or(|name| name != clip.shard.as_str()) {
                return Err(format!("{at}: shard {:?} is not a file name in the dataset directory", clip.shard));
            }
            match (&clip.crops_key, &clip.crops_shape) {
                (None, None) => {}
                (Some(_), Some(c)) if crops_fit(c, &clip.latents_shape) => {}
                (Some(_), Some(c)) => {
                    return Err(format!(
                        "{at}: crops_shape {c:?} is not [L − L_c, channels, L_c, h, w] of latents {:?}",
                        clip.latents_shape
                    ));
                }
                _ => return Err(format!("{at}: crops_key and crops_shape go together")),
            }
            for key in [&clip.latents_key, &clip.prompt_key].into_iter().chain(&clip.crops_key) {
                if !keys.insert((clip.shard.as_str(), key.as_str())) {
                    return Err(format!("{at}: key '{key}' of {} is used twice", clip.shard));
                }
            }
        }
        Ok(())
    }
}
