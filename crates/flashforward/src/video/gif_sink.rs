//! GIF output: image's `GifEncoder` (NeuQuant palette per frame, speed 10), infinite loop.
//!
//! GIF delays are whole centiseconds, so frame delays alternate 6, 7, 6, 6 cs: every 4 frames
//! last exactly 25 cs, i.e. [`FPS`] = 16 frames per second on average.
//!
//! Interruption safety: the encoder appends to an in-memory stream; after every chunk that
//! stream plus the one-byte GIF trailer replaces the output atomically.

use std::io::{self, Write};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::error::{Context, Result};
use image::codecs::gif::{GifEncoder, Repeat};
use image::{Delay, DynamicImage};

use super::{FPS, Frame};
use ff_model::io::write_atomic;

const TRAILER: u8 = 0x3b;
const SPEED: i32 = 10;

/// Streams frames into an animated GIF at `path`.
pub struct GifSink {
    path: PathBuf,
    stream: SharedBuffer,
    encoder: GifEncoder<SharedBuffer>,
    frames: usize,
}

impl GifSink {
    pub fn new(path: PathBuf) -> Result<Self> {
        let stream = SharedBuffer::default();
        let mut encoder = GifEncoder::new_with_speed(stream.clone(), SPEED);
        encoder.set_repeat(Repeat::Infinite)?;
        Ok(Self { path, stream, encoder, frames: 0 })
    }

    /// Encodes one chunk and rewrites the file with every frame so far.
    pub fn push_frames(&mut self, frames: &[Frame]) -> Result<()> {
        for frame in frames {
            let rgba = DynamicImage::ImageRgb8(frame.clone()).into_rgba8();
            let delay = Delay::from_numer_denom_ms(10 * centiseconds(self.frames), 1);
            self.encoder
                .encode_frame(image::Frame::from_parts(rgba, 0, 0, delay))
                .with_context(|| format!("GIF encoder failed on frame {}", self.frames))?;
            self.frames += 1;
        }
        let stream = self.stream.lock()?;
        write_atomic(&self.path, |out| {
            out.write_all(&stream)?;
            out.write_all(&[TRAILER])
        })?;
        Ok(())
    }
}

/// Delay of frame `index` in centiseconds: frame `i` starts at `round(100 i / FPS)` cs.
fn centiseconds(index: usize) -> u32 {
    // round(100 i / FPS) with halves rounded up, in integers.
    let start = |i: usize| (i as u64 * 200 + u64::from(FPS)) / (2 * u64::from(FPS));
    (start(index + 1) - start(index)) as u32
}

/// A `Write` into a buffer that the sink can still read while the encoder owns a handle.
#[derive(Clone, Default)]
struct SharedBuffer(Arc<Mutex<Vec<u8>>>);

impl SharedBuffer {
    fn lock(&self) -> io::Result<MutexGuard<'_, Vec<u8>>> {
        self.0.lock().map_err(|_| io::Error::other("GIF stream lock poisoned"))
    }
}

impl Write for SharedBuffer {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.lock()?.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
