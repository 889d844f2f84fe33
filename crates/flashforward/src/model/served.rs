//! The DiT as it is served: an exported student's two role models (`ff_sched::student`), or one
//! model (a plain DiT; with the `train` feature also a training run or checkpoint, its EMA roles
//! over its base DiT, which the runner merges per role).

use std::path::{Path, PathBuf};

use ff_model::{AttentionBackend, DitConfig, WanDit};
use ff_sched::student::{exported_roles, load_roles};

use crate::error::{Context, Result};

/// A DiT ready to serve.
#[derive(Clone)]
pub enum ServedDit<B: AttentionBackend> {
    /// One model: plain, or with roles the runner merges.
    One(Box<WanDit<B>>),
    /// An exported student's two merged role models.
    Roles {
        /// The planner role.
        planner: Box<WanDit<B>>,
        /// The renderer role.
        renderer: Box<WanDit<B>>,
    },
}

/// The DiT at `path` on `device` (see the module docs).
pub fn load_served<B: AttentionBackend>(config: &DitConfig, path: &Path, device: &B::Device) -> Result<ServedDit<B>> {
    let _span = tracing::info_span!("load_dit", path = %path.display()).entered();
    let what = || format!("cannot load the DiT from {}", path.display());
    if let Some([planner, renderer]) = load_roles::<B>(config, path, device).with_context(what)? {
        return Ok(ServedDit::Roles { planner: Box::new(planner), renderer: Box::new(renderer) });
    }
    Ok(ServedDit::One(Box::new(load_one(config, path, device).with_context(what)?)))
}

#[cfg(feature = "train")]
fn load_one<B: AttentionBackend>(config: &DitConfig, path: &Path, device: &B::Device) -> Result<WanDit<B>> {
    Ok(ff_train::checkpoint::load_dit(config, path, device)?)
}

#[cfg(not(feature = "train"))]
fn load_one<B: AttentionBackend>(config: &DitConfig, path: &Path, device: &B::Device) -> Result<WanDit<B>> {
    let run = |dir: &Path| {
        std::fs::read_dir(dir).into_iter().flatten().flatten().any(|e| e.file_name().to_string_lossy().starts_with("step-"))
            || dir.join("state.json").is_file()
    };
    if path.is_dir() && run(path) {
        crate::error::invalid!(
            "{} is a training run or checkpoint: serving one needs the `train` feature of the flashforward crate",
            path.display()
        );
    }
    Ok(WanDit::load(config, path, device)?)
}

/// The weight file as large as one merged role model, for the memory estimate: an exported
/// student's planner, a training run's base (with the `train` feature); `None` for a plain DiT.
pub fn merged_weights(path: &Path) -> Result<Option<PathBuf>> {
    if let Some([planner, _]) = exported_roles(path)? {
        return Ok(Some(planner));
    }
    #[cfg(feature = "train")]
    return Ok(ff_train::checkpoint::merged_weights(path)?);
    #[cfg(not(feature = "train"))]
    Ok(None)
}
