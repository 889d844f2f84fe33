//! Video output at [`FPS`] frames per second: MP4 (H.264), animated GIF, or numbered PNG frames,
//! written chunk by chunk.
//!
//! Every [`VideoSink::push_frames`] call is a chunk boundary: when it returns, the output on disk
//! is complete and playable with every frame pushed so far (MP4 and GIF: the file is rewritten to
//! a temp file and renamed over the output; PNG: each frame file is written atomically). So an
//! interrupted run, by Ctrl-C or even a kill, leaves the finished chunks; [`VideoSink::finish`]
//! only checks that something was written and returns the path.
//!
//! The format follows the output path: `.mp4`, `.gif`, `.png` (frames `<stem>_00000.png`, ...
//! beside it) or a directory (an existing one, a path ending in `/`, or a path without extension:
//! frames `<dir>/frame_00000.png`, ...). An existing output file, or numbered frames of the same
//! name, are removed when the sink is created, so the disk never shows a stale video as this run's.

mod count;
#[cfg(feature = "video")]
mod decode;
mod frame;
#[cfg(feature = "video")]
mod gif_sink;
#[cfg(feature = "video")]
mod mp4_sink;
#[cfg(feature = "video")]
mod png_sink;
#[cfg(feature = "video")]
mod sink;
#[cfg(all(test, feature = "video"))]
mod tests;

#[cfg(feature = "video")]
use std::path::{Path, PathBuf};

#[cfg(feature = "video")]
use crate::error::{Result, invalid};

pub use count::FrameCount;
#[cfg(feature = "video")]
pub use decode::{Mp4Input, fit};
pub use frame::{Frame, frame, frames_from_tensor_data, frames_from_video};
#[cfg(feature = "video")]
pub use sink::VideoSink;

/// Frame rate of every video output.
pub const FPS: u32 = 16;

/// A generated video: its frames, frame rate and what the generation reported.
#[derive(Debug, Clone)]
pub struct Video {
    frames: Vec<Frame>,
    fps: u32,
    report: crate::Report,
}

impl Video {
    pub(crate) fn new(frames: Vec<Frame>, fps: u32, report: crate::Report) -> Self {
        Self { frames, fps, report }
    }

    /// The frames in order.
    pub fn frames(&self) -> &[Frame] {
        &self.frames
    }

    /// Frames per second.
    pub fn fps(&self) -> u32 {
        self.fps
    }

    /// Timings and what ran.
    pub fn report(&self) -> &crate::Report {
        &self.report
    }

    /// Writes the video in the format of `path`'s extension: `.mp4`, `.gif`, `.png` (numbered
    /// frames beside it) or a folder of PNG frames; returns what was written.
    #[cfg(feature = "video")]
    pub fn write(&self, path: impl AsRef<Path>) -> Result<PathBuf> {
        let mut sink = VideoSink::create(path.as_ref())?;
        sink.push_frames(&self.frames)?;
        sink.finish()
    }

    /// Writes an H.264 MP4 (byte-identical to the file `flashforward generate` writes for the
    /// same request); `path` must end in `.mp4`.
    #[cfg(feature = "video")]
    pub fn write_mp4(&self, path: impl AsRef<Path>) -> Result<PathBuf> {
        self.write_as(path.as_ref(), "mp4")
    }

    /// Writes an animated GIF; `path` must end in `.gif`.
    #[cfg(feature = "video")]
    pub fn write_gif(&self, path: impl AsRef<Path>) -> Result<PathBuf> {
        self.write_as(path.as_ref(), "gif")
    }

    #[cfg(feature = "video")]
    fn write_as(&self, path: &Path, extension: &str) -> Result<PathBuf> {
        match path.extension().is_some_and(|e| e.eq_ignore_ascii_case(extension)) {
            true => self.write(path),
            false => invalid!("{}: a .{extension} file name is expected", path.display()),
        }
    }
}
