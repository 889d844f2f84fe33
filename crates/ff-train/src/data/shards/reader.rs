//! [`ShardDataset`]: a dataset directory read lazily, one clip's bytes per [`ClipSource::get`].

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{ErrorKind, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use burn::tensor::TensorData;
use safetensors::Dtype;
use safetensors::tensor::Metadata;

use super::manifest::{MANIFEST, Manifest};
use crate::data::{ClipSource, LatentClip};
use crate::{Result, TrainError};

/// Largest shard header read (the header of a shard of thousands of clips is a few hundred KB).
const MAX_HEADER: u64 = 64 << 20;

/// Where one tensor's bytes are.
#[derive(Clone, Debug)]
struct Span {
    shard: PathBuf,
    key: String,
    shape: Vec<usize>,
    /// Byte range in the shard file.
    start: u64,
    len: usize,
}

/// A latent-clip dataset on disk (format in the [module docs](super)), checked on open.
#[derive(Clone, Debug)]
pub struct ShardDataset {
    dir: PathBuf,
    manifest: Manifest,
    /// Latents, prompt and (when stored) crops span of each clip.
    spans: Vec<([Span; 2], Option<Span>)>,
}

/// A shard's parsed header and where its data starts.
struct Header {
    metadata: Metadata,
    data_start: u64,
    file_len: u64,
}

impl ShardDataset {
    /// Opens `dir`: reads the manifest and every shard header, and checks that each clip's shard,
    /// keys, dtypes (f32) and shapes are there as the manifest says.
    pub fn open(dir: &Path) -> Result<Self> {
        let manifest = Manifest::load(dir)?;
        let mut headers: BTreeMap<&str, Header> = BTreeMap::new();
        let mut spans = Vec::with_capacity(manifest.clips.len());
        for (index, clip) in manifest.clips.iter().enumerate() {
            let shard = dir.join(&clip.shard);
            if !headers.contains_key(clip.shard.as_str()) {
                let header = read_header(&shard).map_err(|e| match e {
                    TrainError::Io { source, .. } if source.kind() == ErrorKind::NotFound => TrainError::MissingShard {
                        manifest: dir.join(MANIFEST),
                        shard: shard.clone(),
                        clip: index,
                        video: clip.source.clone(),
                    },
                    e => e,
                })?;
                headers.insert(&clip.shard, header);
            }
            let header = &headers[clip.shard.as_str()];
            let span = |key: &str, shape: &[usize]| -> Result<Span> {
                let info = header.metadata.info(key).ok_or_else(|| TrainError::MissingKey {
                    shard: shard.clone(),
                    key: key.into(),
                    clip: index,
                    video: clip.source.clone(),
                })?;
                if info.dtype != Dtype::F32 {
                    let message = format!("tensor '{key}' is {:?}, expected F32", info.dtype);
                    return Err(TrainError::Data { path: shard.clone(), message });
                }
                if info.shape != shape {
                    let (expected, found) = (shape.to_vec(), info.shape.clone());
                    return Err(TrainError::ShapeMismatch { path: shard.clone(), key: key.into(), expected, found });
                }
                let (begin, end) = info.data_offsets;
                if header.data_start + end as u64 > header.file_len {
                    let message = format!("tensor '{key}' ends past the end of the file (truncated shard)");
                    return Err(TrainError::Data { path: shard.clone(), message });
                }
                Ok(Span {
                    shard: shard.clone(),
                    key: key.into(),
                    shape: shape.to_vec(),
                    start: header.data_start + begin as u64,
                    len: end - begin,
                })
            };
            let crops = match (&clip.crops_key, &clip.crops_shape) {
                (Some(key), Some(shape)) => Some(span(key, shape)?),
                _ => None,
            };
            spans.push(([span(&clip.latents_key, &clip.latents_shape)?, span(&clip.prompt_key, &clip.prompt_shape)?], crops));
        }
        Ok(Self { dir: dir.to_path_buf(), manifest, spans })
    }

    /// The dataset's manifest.
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// The dataset directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl ClipSource for ShardDataset {
    fn len(&self) -> usize {
        self.spans.len()
    }

    fn get(&self, index: usize) -> Result<LatentClip> {
        let ([latents, prompt], crops) = self.spans.get(index).ok_or_else(|| TrainError::Data {
            path: self.dir.join(MANIFEST),
            message: format!("clip {index} requested, the dataset has {}", self.spans.len()),
        })?;
        Ok(LatentClip {
            latents: read_tensor(latents)?,
            prompt: read_tensor(prompt)?,
            crops: crops.as_ref().map(read_tensor).transpose()?,
            caption: self.manifest.clips[index].caption.clone(),
        })
    }
}

fn read_header(path: &Path) -> Result<Header> {
    let io = |source| TrainError::Io { path: path.to_path_buf(), source };
    let mut file = File::open(path).map_err(io)?;
    let file_len = file.metadata().map_err(io)?.len();
    let mut n = [0u8; 8];
    file.read_exact(&mut n).map_err(io)?;
    let n = u64::from_le_bytes(n);
    if n > MAX_HEADER || 8 + n > file_len {
        return Err(TrainError::Data { path: path.into(), message: format!("safetensors header of {n} bytes in a {file_len}-byte file") });
    }
    let mut header = vec![0u8; n as usize];
    file.read_exact(&mut header).map_err(io)?;
    let metadata: Metadata = serde_json::from_slice(&header)
        .map_err(|e| TrainError::Data { path: path.into(), message: format!("bad safetensors header: {e}") })?;
    Ok(Header { metadata, data_start: 8 + n, file_len })
}

fn read_tensor(span: &Span) -> Result<TensorData> {
    let io = |source| TrainError::Io { path: span.shard.clone(), source };
    let mut file = File::open(&span.shard).map_err(io)?;
    file.seek(SeekFrom::Start(span.start)).map_err(io)?;
    let mut bytes = vec![0u8; span.len];
    file.read_exact(&mut bytes).map_err(|e| match e.kind() {
        ErrorKind::UnexpectedEof => TrainError::Data {
            path: span.shard.clone(),
            message: format!("tensor '{}' is cut short (the shard changed since open)", span.key),
        },
        _ => io(e),
    })?;
    let values: Vec<f32> = bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
    Ok(TensorData::new(values, span.shape.clone()))
}
