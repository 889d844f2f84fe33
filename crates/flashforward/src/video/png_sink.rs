//! PNG output: one file per frame, `<dir>/<prefix>_00000.png`, `<prefix>_00001.png`, ...
//! Each file is written atomically, so an interrupted run leaves exactly the finished frames.

use std::fs;
use std::path::PathBuf;

use crate::error::{Context, Result};
use image::codecs::png::PngEncoder;
use image::{ExtendedColorType, ImageEncoder};

use super::Frame;
use ff_model::io::write_atomic;

/// Writes numbered PNG frames into a directory.
pub struct PngSink {
    dir: PathBuf,
    prefix: String,
    frames: usize,
}

impl PngSink {
    /// Frames `<dir>/<prefix>_NNNNN.png`; removes such numbered frames left by an earlier run.
    pub fn new(dir: PathBuf, prefix: String) -> Result<Self> {
        fs::create_dir_all(&dir).with_context(|| format!("cannot create frame directory {}", dir.display()))?;
        let sink = Self { dir, prefix, frames: 0 };
        for entry in fs::read_dir(&sink.dir)? {
            let path = entry?.path();
            if path.file_name().and_then(|n| n.to_str()).is_some_and(|n| sink.is_frame_name(n)) {
                fs::remove_file(&path).with_context(|| format!("cannot remove old frame {}", path.display()))?;
            }
        }
        Ok(sink)
    }

    /// Writes one chunk, frame by frame.
    pub fn push_frames(&mut self, frames: &[Frame]) -> Result<()> {
        for frame in frames {
            let path = self.frame_path(self.frames);
            write_atomic(&path, |out| {
                let (w, h) = (frame.width(), frame.height());
                PngEncoder::new(out).write_image(frame.as_raw(), w, h, ExtendedColorType::Rgb8).map_err(std::io::Error::other)
            })?;
            self.frames += 1;
        }
        Ok(())
    }

    /// Path of frame `index`.
    pub fn frame_path(&self, index: usize) -> PathBuf {
        self.dir.join(format!("{}_{index:05}.png", self.prefix))
    }

    /// The frame files as one pattern, `<dir>/<prefix>_%05d.png` (ffmpeg's syntax).
    pub fn pattern(&self) -> PathBuf {
        self.dir.join(format!("{}_%05d.png", self.prefix))
    }

    fn is_frame_name(&self, name: &str) -> bool {
        name.strip_prefix(&self.prefix)
            .and_then(|rest| rest.strip_prefix('_'))
            .and_then(|rest| rest.strip_suffix(".png"))
            .is_some_and(|digits| digits.len() >= 5 && digits.bytes().all(|b| b.is_ascii_digit()))
    }
}
