//! [`ShardWriter`]: builds or resumes a dataset directory, a shard at a time (format and
//! interruption safety in the [module docs](super)).

use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};

use safetensors::Dtype;
use safetensors::tensor::TensorView;

use super::manifest::{ClipEntry, Encoders, MANIFEST, Manifest, crops_fit};
use crate::data::LatentClip;
use crate::{Result, TrainError};

/// A tensor of a clip not yet written: key, shape and little-endian f32 bytes.
type Pending = (String, Vec<usize>, Vec<u8>);

/// Appends clips to a dataset directory.
pub struct ShardWriter {
    dir: PathBuf,
    manifest: Manifest,
    clips_per_shard: usize,
    /// Clips of the shard being filled, with their tensors.
    pending: Vec<(ClipEntry, Vec<Pending>)>,
    /// (source, caption) of every clip in the manifest or pending.
    known: HashSet<(String, String)>,
}

impl ShardWriter {
    /// Creates the dataset `dir`, or resumes it when it has a manifest. Resuming checks that
    /// the manifest's encoders are `encoders`, so one dataset never mixes two models.
    pub fn open(dir: &Path, encoders: Encoders, clips_per_shard: usize) -> Result<Self> {
        let manifest_path = dir.join(MANIFEST);
        let manifest = if manifest_path.exists() {
            let manifest = Manifest::load(dir)?;
            if manifest.encoders != encoders {
                let message =
                    format!("the dataset was encoded with {:?}, this run uses {encoders:?}: write to another directory", manifest.encoders);
                return Err(TrainError::Manifest { manifest: manifest_path, message });
            }
            manifest
        } else {
            fs::create_dir_all(dir).map_err(|source| TrainError::Io { path: dir.into(), source })?;
            Manifest::new(encoders)
        };
        let known = manifest.clips.iter().map(|c| (c.source.clone(), c.caption.clone())).collect();
        Ok(Self { dir: dir.into(), manifest, clips_per_shard: clips_per_shard.max(1), pending: Vec::new(), known })
    }

    /// The manifest as on disk (without the clips of the shard being filled).
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// Clips per shard file.
    pub fn clips_per_shard(&self) -> usize {
        self.clips_per_shard
    }

    /// Whether a clip of this video and caption is in the dataset or pending.
    pub fn contains(&self, source: &str, caption: &str) -> bool {
        self.known.contains(&(source.to_owned(), caption.to_owned()))
    }

    /// Adds the clip of `source` (path relative to the videos directory) made from frames of
    /// `frame_size` `[H, W]`; writes a shard when one is full. Latents must be `[C, L, h, w]`,
    /// the prompt `[tokens, text_dim]`, the crops (if any) `[L − L_c, C, L_c, h, w]`; a (source,
    /// caption) pair already added is an error.
    pub fn push(&mut self, source: &str, frame_size: [usize; 2], clip: &LatentClip) -> Result<()> {
        let [latents_shape, prompt_shape] = [&clip.latents.shape, &clip.prompt.shape];
        for (what, shape, layout) in [("latents", latents_shape, "[channels, L, h, w]"), ("prompt", prompt_shape, "[tokens, text_dim]")] {
            if shape.len() != layout.split(',').count() {
                let message = format!("{what} of {source} have shape {shape:?}, expected {layout}");
                return Err(TrainError::Data { path: self.dir.join(MANIFEST), message });
            }
        }
        if self.contains(source, &clip.caption) {
            let message = format!("{source} with caption {:?} is already in the dataset", clip.caption);
            return Err(TrainError::Data { path: self.dir.join(MANIFEST), message });
        }
        let index = self.manifest.clips.len() + self.pending.len();
        let entry = ClipEntry {
            source: source.into(),
            caption: clip.caption.clone(),
            latents: latents_shape[1],
            frame_size,
            shard: self.next_shard_name(),
            latents_key: format!("clip{index:06}.latents"),
            latents_shape: latents_shape.to_vec(),
            prompt_key: format!("clip{index:06}.prompt"),
            prompt_shape: prompt_shape.to_vec(),
            crops_key: clip.crops.as_ref().map(|_| format!("clip{index:06}.crops")),
            crops_shape: clip.crops.as_ref().map(|c| c.shape.to_vec()),
        };
        let mut tensors = vec![
            (entry.latents_key.clone(), entry.latents_shape.clone(), le_bytes(&clip.latents)),
            (entry.prompt_key.clone(), entry.prompt_shape.clone(), le_bytes(&clip.prompt)),
        ];
        if let (Some(key), Some(shape), Some(crops)) = (&entry.crops_key, &entry.crops_shape, &clip.crops) {
            if !crops_fit(shape, latents_shape) {
                let message =
                    format!("crops of {source} have shape {shape:?}, expected [L − L_c, channels, L_c, h, w] of latents {latents_shape:?}");
                return Err(TrainError::Data { path: self.dir.join(MANIFEST), message });
            }
            tensors.push((key.clone(), shape.clone(), le_bytes(crops)));
        }
        self.known.insert((entry.source.clone(), entry.caption.clone()));
        self.pending.push((entry, tensors));
        if self.pending.len() >= self.clips_per_shard {
            self.flush()?;
        }
        Ok(())
    }

    /// Writes the pending clips as a shard, then the manifest (both atomically).
    pub fn flush(&mut self) -> Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let shard = self.dir.join(&self.pending[0].0.shard);
        let views = self
            .pending
            .iter()
            .flat_map(|(_, tensors)| {
                tensors.iter().map(|(key, shape, bytes)| (key.clone(), TensorView::new(Dtype::F32, shape.clone(), bytes)))
            })
            .map(|(key, view)| view.map(|v| (key, v)))
            .collect::<std::result::Result<HashMap<_, _>, _>>()
            .map_err(|e| TrainError::Data { path: shard.clone(), message: e.to_string() })?;
        let bytes = safetensors::serialize(views, None).map_err(|e| TrainError::Data { path: shard.clone(), message: e.to_string() })?;
        ff_model::io::write_atomic(&shard, |w| std::io::Write::write_all(w, &bytes))?;
        self.manifest.clips.extend(self.pending.drain(..).map(|(entry, _)| entry));
        self.manifest.save(&self.dir)
    }

    /// Writes the last, partial shard and returns the final manifest.
    pub fn finish(mut self) -> Result<Manifest> {
        self.flush()?;
        Ok(self.manifest)
    }

    /// The shard the pending clips go to: the first `shard-NNNNN.safetensors` no manifest clip
    /// uses (a stray file of an interrupted run is overwritten).
    fn next_shard_name(&self) -> String {
        if let Some((entry, _)) = self.pending.first() {
            return entry.shard.clone();
        }
        let used: HashSet<&str> = self.manifest.clips.iter().map(|c| c.shard.as_str()).collect();
        (0..).map(|i| format!("shard-{i:05}.safetensors")).find(|name| !used.contains(name.as_str())).expect("an unused name")
    }
}

/// The values of `data` as little-endian f32 bytes (other float dtypes are converted).
fn le_bytes(data: &burn::tensor::TensorData) -> Vec<u8> {
    let data = data.clone().convert::<f32>();
    data.iter::<f32>().flat_map(f32::to_le_bytes).collect()
}
