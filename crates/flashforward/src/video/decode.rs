//! MP4 input: the H.264 track of an MP4 file decoded by openh264, resampled to [`FPS`], and
//! each frame resized and centre-cropped to a target size.
//!
//! * Demux: the `mp4` crate reads the sample tables; samples are length-prefixed NAL units, turned
//!   into an Annex B stream (start codes) after the track's SPS/PPS for openh264. Fragmented MP4
//!   and tracks that are not H.264 are refused.
//! * Timing: presentation times come from the track's tables (decode deltas plus composition
//!   offsets), so B-frame streams work; the decoder returns pictures in presentation order, the
//!   i-th with the i-th smallest time. Output frame k shows the picture on screen at
//!   `t0 + k / FPS` (t0 = the first picture's time): a 16 FPS video maps one to one, a 30 FPS one
//!   drops about every other picture. [`Mp4Input::frames_at_fps`] counts the output frames the
//!   video covers (every `t0 + k / FPS` before the end of its last picture).
//! * Colour: YUV 4:2:0 to RGB8 with BT.601 limited range (openh264's conversion, what the
//!   project's MP4 sink writes); the VUI colour description of other encoders is not read.
//! * Size: [`fit`] crops the largest centred region of the target aspect ratio and resizes it to
//!   the target with a Catmull-Rom filter (antialiased when shrinking).

use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};

use crate::error::{Context, Result, invalid};
use image::imageops::{self, FilterType};
use mp4::{MediaType, Mp4Reader, Mp4Track};
use openh264::OpenH264API;
use openh264::decoder::{DecodedYUV, Decoder, DecoderConfig, Flush};
use openh264::formats::YUVSource;

use super::{FPS, Frame};

/// An opened MP4 file and its H.264 track.
pub struct Mp4Input {
    path: PathBuf,
    reader: Mp4Reader<BufReader<File>>,
    track_id: u32,
    /// Bytes of each NAL unit's length prefix in the samples.
    length_size: usize,
    /// SPS and PPS units as an Annex B stream, fed to the decoder first.
    parameter_sets: Vec<u8>,
    /// Coded `(width, height)`.
    size: (usize, usize),
    /// Presentation times of the pictures, ascending, in `timescale` ticks.
    times: Vec<i64>,
    /// When the last picture stops showing.
    end: i64,
    timescale: i64,
}

impl Mp4Input {
    /// Opens `path` and reads its container (no decoding).
    pub fn open(path: &Path) -> Result<Self> {
        let file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
        let len = file.metadata()?.len();
        let reader =
            Mp4Reader::read_header(BufReader::new(file), len).with_context(|| format!("{} is not a readable MP4", path.display()))?;
        if reader.is_fragmented() {
            invalid!("{}: fragmented MP4 is not supported; remux it (ffmpeg -i in.mp4 -c copy out.mp4)", path.display());
        }
        let track = reader
            .tracks()
            .values()
            .find(|t| matches!(t.media_type(), Ok(MediaType::H264)))
            .ok_or_else(|| crate::Error::Invalid(format!("{}: no H.264 video track", path.display())))?;
        let stbl = &track.trak.mdia.minf.stbl;
        let avcc = &stbl.stsd.avc1.as_ref().expect("an H.264 track has an avc1 entry").avcc;
        let mut parameter_sets = Vec::new();
        for unit in avcc.sequence_parameter_sets.iter().chain(&avcc.picture_parameter_sets) {
            parameter_sets.extend([0, 0, 0, 1]);
            parameter_sets.extend(&unit.bytes);
        }
        let (times, end) = presentation_times(track).with_context(|| format!("{}: bad timing tables", path.display()))?;
        Ok(Self {
            path: path.into(),
            track_id: track.track_id(),
            length_size: usize::from(avcc.length_size_minus_one & 3) + 1,
            parameter_sets,
            size: (usize::from(track.width()), usize::from(track.height())),
            times,
            end,
            timescale: i64::from(track.timescale().max(1)),
            reader,
        })
    }

    /// Coded `(width, height)` in pixels.
    pub fn size(&self) -> (usize, usize) {
        self.size
    }

    /// Output frames at [`FPS`] the video covers.
    pub fn frames_at_fps(&self) -> usize {
        let Some(&first) = self.times.first() else { return 0 };
        // Frames k with first + k·timescale/FPS < end.
        let span = i128::from(self.end - first) * i128::from(FPS);
        usize::try_from((span + i128::from(self.timescale) - 1) / i128::from(self.timescale)).unwrap_or(0)
    }

    /// The first `count` frames at [`FPS`], each [`fit`] to `width × height`.
    pub fn read_frames(mut self, count: usize, width: usize, height: usize) -> Result<Vec<Frame>> {
        let available = self.frames_at_fps();
        if count > available {
            invalid!("{}: {count} frames at {FPS} FPS requested, the video has {available}", self.path.display());
        }
        let name = self.path.display().to_string();
        let config = DecoderConfig::new().flush_after_decode(Flush::NoFlush);
        let mut decoder = Decoder::with_api_config(OpenH264API::from_source(), config)
            .map_err(|e| crate::Error::Invalid(format!("{name}: H.264 decoder: {e}")))?;
        decoder.decode(&self.parameter_sets).map_err(|e| crate::Error::Invalid(format!("{name}: bad SPS/PPS: {e}")))?;
        let first = self.times.first().copied().unwrap_or(0);
        let mut out = Resampler { frames: Vec::with_capacity(count), count, shown: None, first, step: self.timescale };
        let time_of = |picture: usize| {
            self.times.get(picture).copied().ok_or_else(|| crate::Error::Invalid(format!("{name}: more pictures than samples")))
        };
        let mut pictures = 0;
        let mut packet = Vec::new();
        for index in 1..=self.times.len() as u32 {
            if out.done() {
                break;
            }
            let sample = self
                .reader
                .read_sample(self.track_id, index)
                .with_context(|| format!("{name}: cannot read sample {index}"))?
                .ok_or_else(|| crate::Error::Invalid(format!("{name}: sample {index} is missing")))?;
            annex_b(&sample.bytes, self.length_size, &mut packet).with_context(|| format!("{name}: sample {index}"))?;
            let picture =
                decoder.decode(&packet).map_err(|e| crate::Error::Invalid(format!("{name}: cannot decode sample {index}: {e}")))?;
            if let Some(yuv) = picture {
                out.push(time_of(pictures)?, to_frame(&yuv)?, width, height)?;
                pictures += 1;
            }
        }
        if !out.done() {
            for yuv in decoder.flush_remaining().map_err(|e| crate::Error::Invalid(format!("{name}: cannot flush the decoder: {e}")))? {
                out.push(time_of(pictures)?, to_frame(&yuv)?, width, height)?;
                pictures += 1;
            }
            out.finish(self.end, width, height)?;
        }
        if !out.done() {
            invalid!("{name}: decoded {pictures} of {} pictures, {} of {count} frames", self.times.len(), out.frames.len());
        }
        Ok(out.frames)
    }
}

/// Picks the frame on screen at each output time `first + k·step/FPS` from pictures arriving in
/// presentation order.
struct Resampler {
    frames: Vec<Frame>,
    count: usize,
    /// The latest picture and its time; it shows until the next one's time.
    shown: Option<(i64, Frame)>,
    first: i64,
    /// Ticks per second.
    step: i64,
}

impl Resampler {
    fn done(&self) -> bool {
        self.frames.len() == self.count
    }

    /// Emits the shown picture for every output time before `until`.
    fn emit_until(&mut self, until: i64, width: usize, height: usize) -> Result<()> {
        let Some((_, picture)) = &self.shown else { return Ok(()) };
        let mut fitted: Option<Frame> = None;
        while !self.done() {
            // Output time k, compared exactly: first + k·step/FPS < until.
            let k = self.frames.len() as i128;
            if k * i128::from(self.step) >= i128::from(until - self.first) * i128::from(FPS) {
                break;
            }
            let frame = match &fitted {
                Some(f) => f.clone(),
                None => fitted.insert(fit(picture, width, height)?).clone(),
            };
            self.frames.push(frame);
        }
        Ok(())
    }

    fn push(&mut self, time: i64, picture: Frame, width: usize, height: usize) -> Result<()> {
        self.emit_until(time, width, height)?;
        self.shown = Some((time, picture));
        Ok(())
    }

    fn finish(&mut self, end: i64, width: usize, height: usize) -> Result<()> {
        self.emit_until(end, width, height)
    }
}

/// Presentation times of the track's pictures (sorted) and the end of the last, from the decode
/// deltas (`stts`) and composition offsets (`ctts`).
fn presentation_times(track: &Mp4Track) -> Result<(Vec<i64>, i64)> {
    let (stbl, samples) = (&track.trak.mdia.minf.stbl, track.sample_count() as usize);
    let mut times = Vec::with_capacity(samples);
    let mut end = i64::MIN;
    let mut decode = 0i64;
    let mut offsets =
        stbl.ctts.iter().flat_map(|c| &c.entries).flat_map(|e| std::iter::repeat_n(i64::from(e.sample_offset), e.sample_count as usize));
    for entry in &stbl.stts.entries {
        for _ in 0..entry.sample_count {
            let time = decode + offsets.next().unwrap_or(0);
            decode += i64::from(entry.sample_delta);
            end = end.max(time + i64::from(entry.sample_delta));
            times.push(time);
        }
    }
    if times.len() != samples {
        invalid!("the decode-time table covers {} samples, the track has {samples}", times.len());
    }
    times.sort_unstable();
    Ok((times, end))
}

/// Rewrites one sample's length-prefixed NAL units as an Annex B packet in `out`.
fn annex_b(sample: &[u8], length_size: usize, out: &mut Vec<u8>) -> Result<()> {
    out.clear();
    let mut rest = sample;
    while !rest.is_empty() {
        if rest.len() < length_size {
            invalid!("{} trailing bytes are not a NAL length", rest.len());
        }
        let (prefix, tail) = rest.split_at(length_size);
        let len = prefix.iter().fold(0usize, |n, b| n << 8 | usize::from(*b));
        if len > tail.len() {
            invalid!("NAL unit of {len} bytes, {} left in the sample", tail.len());
        }
        out.extend([0, 0, 0, 1]);
        out.extend(&tail[..len]);
        rest = &tail[len..];
    }
    Ok(())
}

fn to_frame(yuv: &DecodedYUV<'_>) -> Result<Frame> {
    let (width, height) = yuv.dimensions();
    let mut rgb = vec![0; 3 * width * height];
    yuv.write_rgb8(&mut rgb);
    super::frame::frame(width, height, rgb)
}

/// `frame` centre-cropped to the aspect ratio of `width × height` and resized to it.
pub fn fit(frame: &Frame, width: usize, height: usize) -> Result<Frame> {
    let (w, h) = (frame.width() as usize, frame.height() as usize);
    if width == 0 || height == 0 {
        invalid!("target size {width}x{height} is empty");
    }
    // The largest centred crop with crop_w / crop_h = width / height.
    let (crop_w, crop_h) = if w * height > width * h {
        (((h * width) as f64 / height as f64).round().max(1.0) as usize, h)
    } else {
        (w, ((w * height) as f64 / width as f64).round().max(1.0) as usize)
    };
    let cropped = imageops::crop_imm(frame, ((w - crop_w) / 2) as u32, ((h - crop_h) / 2) as u32, crop_w as u32, crop_h as u32).to_image();
    let resized = if (crop_w, crop_h) == (width, height) {
        cropped
    } else {
        imageops::resize(&cropped, width as u32, height as u32, FilterType::CatmullRom)
    };
    super::frame::frame(width, height, resized.into_raw())
}

#[cfg(test)]
mod tests;
