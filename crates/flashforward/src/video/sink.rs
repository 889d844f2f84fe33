//! [`VideoSink`]: a video written chunk by chunk, complete and playable after every chunk (see the
//! module docs of [`crate::video`]).

use std::fs;
use std::path::{MAIN_SEPARATOR, Path, PathBuf};

use super::Frame;
use super::gif_sink::GifSink;
use super::mp4_sink::Mp4Sink;
use super::png_sink::PngSink;
use crate::error::{Context, Result, invalid};

/// Writes a video chunk by chunk; see the module docs for formats and interruption safety.
pub struct VideoSink {
    encoder: Encoder,
    /// What [`VideoSink::finish`] returns: the file, the frame directory or the frame pattern.
    output: PathBuf,
    size: Option<(u32, u32)>,
    frames: usize,
}

enum Encoder {
    Mp4(Mp4Sink),
    Gif(GifSink),
    Png(PngSink),
}

/// Where a video goes, from its output path (see the module docs).
enum Layout {
    /// Numbered PNG frames `<dir>/<prefix>_NNNNN.png`; `finish` returns the directory, or the
    /// frame pattern when the path named a `.png`.
    Frames { dir: PathBuf, prefix: String, pattern: bool },
    /// One `.mp4` or `.gif` file.
    File { path: PathBuf, mp4: bool },
}

impl Layout {
    fn of(path: &Path) -> Result<Self> {
        let is_dir = path.is_dir() || path.as_os_str().to_string_lossy().ends_with(MAIN_SEPARATOR);
        let extension = path.extension().filter(|_| !is_dir).map(|e| e.to_string_lossy().to_ascii_lowercase());
        Ok(match extension.as_deref() {
            None => Self::Frames { dir: path.to_path_buf(), prefix: "frame".into(), pattern: false },
            Some("png") => {
                let prefix = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
                Self::Frames { dir: parent(path), prefix, pattern: true }
            }
            Some(ext @ ("mp4" | "gif")) => Self::File { path: path.to_path_buf(), mp4: ext == "mp4" },
            Some(other) => {
                invalid!("unsupported video output `.{other}` in {}: use .mp4, .gif, .png (numbered frames) or a directory", path.display())
            }
        })
    }

    /// The first file the sink will write.
    fn first_file(&self) -> PathBuf {
        match self {
            Self::Frames { dir, prefix, .. } => dir.join(format!("{prefix}_00000.png")),
            Self::File { path, .. } => path.clone(),
        }
    }
}

impl VideoSink {
    /// Checks, before any work, that `path` names a supported output and that its directory
    /// takes files: the directory is created, and the temp file of the first write is created
    /// and removed. Existing outputs are left alone.
    pub fn check(path: &Path) -> Result<()> {
        let first = Layout::of(path)?.first_file();
        let dir = parent(&first);
        fs::create_dir_all(&dir)
            .map_err(|e| crate::Error::io(&dir, e))
            .with_context(|| format!("--out {}: cannot create the directory {}", path.display(), dir.display()))?;
        ff_model::io::check_writable(&first).with_context(|| format!("--out {}: cannot write {}", path.display(), first.display()))
    }

    /// A sink for `path`, its format chosen by extension (see the module docs).
    pub fn create(path: &Path) -> Result<Self> {
        let (encoder, output) = match Layout::of(path)? {
            Layout::Frames { dir, prefix, pattern } => {
                let sink = PngSink::new(dir, prefix)?;
                let output = if pattern { sink.pattern() } else { path.to_path_buf() };
                (Encoder::Png(sink), output)
            }
            Layout::File { path, mp4 } => {
                fs::create_dir_all(parent(&path)).with_context(|| format!("cannot create the directory of {}", path.display()))?;
                if path.exists() {
                    fs::remove_file(&path).with_context(|| format!("cannot replace {}", path.display()))?;
                }
                let encoder = if mp4 { Encoder::Mp4(Mp4Sink::new(path.clone())) } else { Encoder::Gif(GifSink::new(path.clone())?) };
                (encoder, path)
            }
        };
        Ok(Self { encoder, output, size: None, frames: 0 })
    }

    /// Writes one chunk of frames; on return the output holds every frame pushed so far.
    /// All frames of a video must have the same size.
    pub fn push_frames(&mut self, frames: &[Frame]) -> Result<()> {
        if frames.is_empty() {
            return Ok(());
        }
        for (i, frame) in frames.iter().enumerate() {
            let size = (frame.width(), frame.height());
            let expected = *self.size.get_or_insert(size);
            if size != expected {
                invalid!("frame {} is {}x{} but the video is {}x{}", self.frames + i, size.0, size.1, expected.0, expected.1);
            }
        }
        match &mut self.encoder {
            Encoder::Mp4(sink) => sink.push_frames(frames),
            Encoder::Gif(sink) => sink.push_frames(frames),
            Encoder::Png(sink) => sink.push_frames(frames),
        }
        .with_context(|| format!("cannot write video {}", self.output.display()))?;
        self.frames += frames.len();
        Ok(())
    }

    /// Frames on disk so far.
    pub fn frames_written(&self) -> usize {
        self.frames
    }

    /// Ends the video and returns its path (the frame directory or pattern for PNG output).
    pub fn finish(self) -> Result<PathBuf> {
        if self.frames == 0 {
            invalid!("no frames were written to {}", self.output.display());
        }
        Ok(self.output)
    }
}

fn parent(path: &Path) -> PathBuf {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    }
}
