//! MP4 output: H.264 (openh264) in an ISO-BMFF file written by the `mp4` crate, [`FPS`] frames per
//! second, BT.601 limited range (what openh264's RGB to YUV 4:2:0 conversion produces, signalled
//! in the SPS).
//!
//! Rate control is off: openh264 then codes at a constant quantizer (its default QP, 26), never
//! drops a frame, and quality does not depend on resolution or content (on a hard synthetic
//! 480x272 pattern: ~34 dB PSNR at ~1.2 Mbit/s, where bitrate mode at 0.25 bit/pixel gave 29 dB).
//! openh264's bitrate modes cannot hold a bitrate without frame skipping, which would break the
//! one-sample-per-frame timeline, and they warn about it on stderr.
//!
//! Interruption safety: the encoded samples (length-prefixed NAL units, a few KB per frame) stay
//! in memory, and after every chunk the whole file (`ftyp`, `mdat`, `moov`) is rewritten to a temp
//! file and renamed over the output. Frames are never re-encoded; only the container is rewritten,
//! so the file on disk is always a complete, playable MP4 of the finished chunks. (The `mp4` crate
//! cannot write fragmented MP4, which would avoid the rewrite.)

use std::path::PathBuf;

use crate::error::{Result, invalid};
use mp4::{AvcConfig, FourCC, MediaConfig, Mp4Config, Mp4Sample, Mp4Writer, TrackConfig, TrackType};
use openh264::OpenH264API;
use openh264::encoder::{Encoder, EncoderConfig, FrameRate, FrameType, IntraFramePeriod, RateControlMode, VuiConfig};
use openh264::formats::{RgbSliceU8, YUVBuffer};

use super::{FPS, Frame};
use ff_model::io::write_atomic;

/// Media and movie timescale (ticks per second); one frame lasts [`TICKS_PER_FRAME`].
const TIMESCALE: u32 = FPS * 1000;
const TICKS_PER_FRAME: u32 = 1000;
/// A keyframe every 3 s, for seeking.
const KEYFRAME_INTERVAL: u32 = 3 * FPS;

const NAL_SPS: u8 = 7;
const NAL_PPS: u8 = 8;

/// Streams frames into an H.264 MP4 at `path`.
pub struct Mp4Sink {
    path: PathBuf,
    /// Boxed: openh264's per-encoder bitstream info is several KB.
    encoder: Option<Box<Encoder>>,
    sps: Option<Vec<u8>>,
    pps: Option<Vec<u8>>,
    /// Encoded size (even).
    size: (usize, usize),
    samples: Vec<Mp4Sample>,
}

impl Mp4Sink {
    pub fn new(path: PathBuf) -> Self {
        Self { path, encoder: None, sps: None, pps: None, size: (0, 0), samples: Vec::new() }
    }

    /// Encodes one chunk and rewrites the file with every frame so far.
    pub fn push_frames(&mut self, frames: &[Frame]) -> Result<()> {
        for frame in frames {
            self.encode(frame)?;
        }
        self.write_file()
    }

    fn encode(&mut self, frame: &Frame) -> Result<()> {
        let frame = super::frame::padded_to_even(frame);
        let size = (frame.width() as usize, frame.height() as usize);
        let encoder = match &mut self.encoder {
            Some(encoder) => encoder,
            None => {
                self.size = size;
                self.encoder.insert(Box::new(new_encoder(size)?))
            }
        };
        let yuv = YUVBuffer::from_rgb8_source(RgbSliceU8::new(frame.as_raw(), size));
        let index = self.samples.len();
        let stream = encoder.encode(&yuv).map_err(|e| crate::Error::Invalid(format!("H.264 encoder failed on frame {index}: {e}")))?;
        let is_sync = match stream.frame_type() {
            FrameType::IDR => true,
            FrameType::I | FrameType::P => false,
            other => invalid!("H.264 encoder returned no picture for frame {index} ({other:?})"),
        };
        let mut data = Vec::new();
        for layer in (0..stream.num_layers()).filter_map(|l| stream.layer(l)) {
            for nal in (0..layer.nal_count()).filter_map(|n| layer.nal_unit(n)).map(strip_start_code) {
                match nal.first().map(|header| header & 0x1f) {
                    Some(NAL_SPS) => self.sps = Some(nal.to_vec()),
                    Some(NAL_PPS) => self.pps = Some(nal.to_vec()),
                    Some(_) => {
                        data.extend_from_slice(&(nal.len() as u32).to_be_bytes());
                        data.extend_from_slice(nal);
                    }
                    None => {}
                }
            }
        }
        self.samples.push(Mp4Sample {
            start_time: index as u64 * u64::from(TICKS_PER_FRAME),
            duration: TICKS_PER_FRAME,
            rendering_offset: 0,
            is_sync,
            bytes: data.into(),
        });
        Ok(())
    }

    fn write_file(&self) -> Result<()> {
        let (Some(sps), Some(pps)) = (&self.sps, &self.pps) else {
            invalid!("H.264 encoder produced no SPS/PPS for {}", self.path.display());
        };
        let side = |n: usize| u16::try_from(n).map_err(|_| crate::Error::Invalid(format!("{n} px is too large for an MP4 frame")));
        let avc =
            AvcConfig { width: side(self.size.0)?, height: side(self.size.1)?, seq_param_set: sps.clone(), pic_param_set: pps.clone() };
        write_atomic(&self.path, |out| {
            let mp4 = std::io::Error::other;
            let mut writer = Mp4Writer::write_start(out, &mp4_config()).map_err(mp4)?;
            let track = TrackConfig {
                track_type: TrackType::Video,
                timescale: TIMESCALE,
                language: "und".into(),
                media_conf: MediaConfig::AvcConfig(avc),
            };
            writer.add_track(&track).map_err(mp4)?;
            for sample in &self.samples {
                writer.write_sample(1, sample).map_err(mp4)?;
            }
            writer.write_end().map_err(mp4)
        })?;
        Ok(())
    }
}

fn new_encoder((width, height): (usize, usize)) -> Result<Encoder> {
    let config = EncoderConfig::new()
        .max_frame_rate(FrameRate::from_hz(FPS as f32))
        .rate_control_mode(RateControlMode::Off)
        .skip_frames(false)
        .intra_frame_period(IntraFramePeriod::from_num_frames(KEYFRAME_INTERVAL))
        .vui(VuiConfig::bt601());
    Encoder::with_api_config(OpenH264API::from_source(), config)
        .map_err(|e| crate::Error::Invalid(format!("cannot create H.264 encoder for {width}x{height}: {e}")))
}

fn mp4_config() -> Mp4Config {
    let brands = [*b"isom", *b"iso2", *b"avc1", *b"mp41"].map(FourCC::from);
    Mp4Config { major_brand: brands[0], minor_version: 512, compatible_brands: brands.to_vec(), timescale: TIMESCALE }
}

/// A NAL unit without its Annex B start code (openh264 emits `00 00 00 01` or `00 00 01`).
fn strip_start_code(nal: &[u8]) -> &[u8] {
    nal.strip_prefix(&[0, 0, 0, 1]).or_else(|| nal.strip_prefix(&[0, 0, 1])).unwrap_or(nal)
}
