//! A model folder, opened without loading weights: its files ([`files`]), their configs checked
//! against each other ([`configs`]), and an exported student's manifest. [`served`] loads the
//! DiT as it is served (one model, or a student's two role models).

pub mod configs;
pub mod files;
pub mod served;

use std::path::PathBuf;

use ff_sched::student::StudentManifest;

use crate::error::Result;
pub use configs::Configs;
pub use files::{Fallback, FileOverrides, ModelFiles};

/// A model's files, configs and (for an exported student) its manifest: everything a request is
/// checked against before any weight loads.
#[derive(Debug, Clone)]
pub struct Model {
    /// Where each file is.
    pub files: ModelFiles,
    /// The configs, checked against each other.
    pub configs: Configs,
    /// How an exported student runs as trained, and which prompts it draws; `None` for a plain
    /// DiT, a training run or a Wan model.
    pub student: Option<StudentManifest>,
}

impl Model {
    /// Opens the model of `files`: reads the configs and the student manifest.
    pub fn open(files: ModelFiles) -> Result<Self> {
        let student = if files.dit.is_dir() { StudentManifest::read(&files.dit)? } else { None };
        let configs = Configs::read(&files)?;
        tracing::debug!(dit = %files.dit.display(), student = student.is_some(), "model opened");
        Ok(Self { files, configs, student })
    }

    /// Opens the model folder `dir` (either layout).
    pub fn open_dir(dir: impl Into<PathBuf>) -> Result<Self> {
        Self::open(ModelFiles::from_dir(dir)?)
    }

    /// Frame height and width in pixels when a request names none: the student's training size,
    /// else Wan2.1's 480 × 832.
    pub fn frame_size(&self) -> [usize; 2] {
        self.student.as_ref().map_or([480, 832], |s| s.frame_size)
    }
}
