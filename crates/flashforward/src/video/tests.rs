//! Round trips through real decoders: the mp4 crate's reader + openh264's decoder, image's GIF
//! and PNG decoders. Frames are synthetic: left half colour(i), right half its complement, so
//! order, orientation and colour all show.

use std::fs::{self, File};
use std::io::BufReader;
use std::path::{Path, PathBuf};

use image::AnimationDecoder;
use image::codecs::gif::GifDecoder;
use openh264::decoder::Decoder;
use openh264::formats::YUVSource;

use super::*;

/// A fresh empty directory for one test, removed when dropped.
pub struct Scratch(PathBuf);

impl Scratch {
    pub fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("ff-cli-video-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn colour(i: usize) -> [u8; 3] {
    [30 + 10 * i as u8, 220 - 8 * i as u8, 60 + 50 * (i % 3) as u8]
}

fn frame(i: usize, width: usize, height: usize) -> Frame {
    let (left, right) = (colour(i), colour(i).map(|c| 255 - c));
    let rgb = (0..height * width).flat_map(|p| if p % width < width / 2 { left } else { right }).collect();
    crate::video::frame::frame(width, height, rgb).unwrap()
}

fn frames(range: std::ops::Range<usize>, width: usize, height: usize) -> Vec<Frame> {
    range.map(|i| frame(i, width, height)).collect()
}

/// Mean colour of the `x0..x1` columns (all rows but a 4-pixel border) of an RGB image.
fn mean(rgb: &[u8], width: usize, height: usize, (x0, x1): (usize, usize)) -> [f32; 3] {
    let mut sum = [0.0; 3];
    let mut n = 0.0;
    for y in 4..height - 4 {
        for x in x0..x1 {
            for c in 0..3 {
                sum[c] += f32::from(rgb[3 * (y * width + x) + c]);
            }
            n += 1.0;
        }
    }
    sum.map(|s| s / n)
}

/// Asserts both halves of a decoded frame match frame `i` to within `tol` per channel.
fn assert_halves(rgb: &[u8], width: usize, height: usize, i: usize, tol: f32) {
    let half = width / 2;
    let expected = [colour(i), colour(i).map(|c| 255 - c)];
    for (side, cols) in [(0, (2, half - 4)), (1, (half + 4, width - 2))] {
        let got = mean(rgb, width, height, cols);
        for c in 0..3 {
            let want = f32::from(expected[side][c]);
            assert!((got[c] - want).abs() <= tol, "frame {i} side {side} channel {c}: {got:?} vs {:?}", expected[side]);
        }
    }
}

fn read_mp4(path: &Path) -> mp4::Mp4Reader<BufReader<File>> {
    let size = fs::metadata(path).unwrap().len();
    mp4::Mp4Reader::read_header(BufReader::new(File::open(path).unwrap()), size).unwrap()
}

/// Checks the container: one H.264 track of `frames` samples, 16 FPS, `width x height`.
fn assert_mp4(path: &Path, frames: u32, width: u16, height: u16) {
    let reader = read_mp4(path);
    assert_eq!(reader.tracks().len(), 1);
    let track = reader.tracks().values().next().unwrap();
    assert_eq!(track.media_type().unwrap(), mp4::MediaType::H264);
    assert_eq!((track.width(), track.height()), (width, height));
    assert_eq!(track.sample_count(), frames);
    assert_eq!(track.timescale(), FPS * 1000);
    let seconds = f64::from(frames) / f64::from(FPS);
    assert!((track.duration().as_secs_f64() - seconds).abs() < 1e-6, "{:?}", track.duration());
    assert!((reader.duration().as_secs_f64() - seconds).abs() < 1e-3, "{:?}", reader.duration());
    assert!((track.frame_rate() - f64::from(FPS)).abs() < 1e-6, "{}", track.frame_rate());
}

/// Decodes every sample of the MP4's track with openh264: RGB frames of `(width, height)`.
fn decode_mp4(path: &Path) -> Vec<(usize, usize, Vec<u8>)> {
    let mut reader = read_mp4(path);
    let track = reader.tracks().values().next().unwrap();
    let (id, count) = (track.track_id(), track.sample_count());
    // mp4 samples are length-prefixed NAL units without parameter sets; openh264 wants Annex B.
    let mut annex_b = Vec::new();
    for nal in [track.sequence_parameter_set().unwrap(), track.picture_parameter_set().unwrap()] {
        annex_b.extend_from_slice(&[0, 0, 0, 1]);
        annex_b.extend_from_slice(nal);
    }
    let mut decoder = Decoder::new().unwrap();
    let mut decoded = Vec::new();
    for sample_id in 1..=count {
        let sample = reader.read_sample(id, sample_id).unwrap().unwrap();
        let mut bytes = &sample.bytes[..];
        while !bytes.is_empty() {
            let len = u32::from_be_bytes(bytes[..4].try_into().unwrap()) as usize;
            annex_b.extend_from_slice(&[0, 0, 0, 1]);
            annex_b.extend_from_slice(&bytes[4..4 + len]);
            bytes = &bytes[4 + len..];
        }
        let yuv = decoder.decode(&annex_b).unwrap().expect("one picture per sample");
        let (w, h) = yuv.dimensions();
        let mut rgb = vec![0; 3 * w * h];
        yuv.write_rgb8(&mut rgb);
        decoded.push((w, h, rgb));
        annex_b.clear();
    }
    decoded
}

#[test]
fn mp4_is_playable_after_each_chunk_with_all_frames_at_16_fps() {
    let scratch = Scratch::new("mp4_chunks");
    let path = scratch.path().join("clip.mp4");
    let mut sink = VideoSink::create(&path).unwrap();
    sink.push_frames(&frames(0..9, 32, 32)).unwrap();
    // Interrupted here: the file of the first chunk is already complete.
    assert_mp4(&path, 9, 32, 32);
    sink.push_frames(&frames(9..21, 32, 32)).unwrap();
    assert_mp4(&path, 21, 32, 32);
    assert_eq!(sink.frames_written(), 21);
    assert_eq!(sink.finish().unwrap(), path);
    assert_mp4(&path, 21, 32, 32);
}

#[test]
fn mp4_decodes_to_the_pushed_frames() {
    let scratch = Scratch::new("mp4_decode");
    let path = scratch.path().join("clip.mp4");
    let mut sink = VideoSink::create(&path).unwrap();
    sink.push_frames(&frames(0..5, 32, 32)).unwrap();
    sink.push_frames(&frames(5..9, 32, 32)).unwrap();
    let decoded = decode_mp4(&path);
    assert_eq!(decoded.len(), 9);
    for (i, (w, h, rgb)) in decoded.iter().enumerate() {
        assert_eq!((*w, *h), (32, 32));
        assert_halves(rgb, 32, 32, i, 12.0);
    }
}

#[test]
fn an_abandoned_mp4_sink_leaves_the_finished_chunks() {
    let scratch = Scratch::new("mp4_abandoned");
    let path = scratch.path().join("clip.mp4");
    let mut sink = VideoSink::create(&path).unwrap();
    sink.push_frames(&frames(0..9, 32, 32)).unwrap();
    drop(sink);
    assert_mp4(&path, 9, 32, 32);
    assert_eq!(decode_mp4(&path).len(), 9);
}

#[test]
fn odd_mp4_frames_are_padded_to_even() {
    let scratch = Scratch::new("mp4_odd");
    let path = scratch.path().join("odd.mp4");
    let mut sink = VideoSink::create(&path).unwrap();
    sink.push_frames(&frames(0..3, 33, 17)).unwrap();
    assert_mp4(&path, 3, 34, 18);
    let decoded = decode_mp4(&path);
    // The padded column repeats the right half's colour, so the halves still check out.
    for (i, (w, h, rgb)) in decoded.iter().enumerate() {
        assert_eq!((*w, *h), (34, 18));
        assert_halves(rgb, 34, 18, i, 12.0);
    }
}

#[test]
fn mp4_replaces_an_old_file_at_creation() {
    let scratch = Scratch::new("mp4_stale");
    let path = scratch.path().join("clip.mp4");
    fs::write(&path, b"an older video").unwrap();
    let mut sink = VideoSink::create(&path).unwrap();
    assert!(!path.exists(), "a stale file must not pass for this run's output");
    sink.push_frames(&[]).unwrap();
    assert!(!path.exists());
    assert!(sink.finish().is_err(), "no frames pushed");
}

fn read_gif(path: &Path) -> Vec<image::Frame> {
    GifDecoder::new(BufReader::new(File::open(path).unwrap())).unwrap().into_frames().collect_frames().unwrap()
}

#[test]
fn gif_is_complete_after_each_chunk_and_averages_16_fps() {
    let scratch = Scratch::new("gif_chunks");
    let path = scratch.path().join("clip.gif");
    let mut sink = VideoSink::create(&path).unwrap();
    sink.push_frames(&frames(0..9, 32, 32)).unwrap();
    assert_eq!(read_gif(&path).len(), 9, "interrupted after one chunk");
    sink.push_frames(&frames(9..21, 32, 32)).unwrap();
    let path = sink.finish().unwrap();
    let decoded = read_gif(&path);
    assert_eq!(decoded.len(), 21);
    let total_ms: u32 = decoded.iter().map(|f| f.delay().numer_denom_ms()).map(|(n, d)| n / d).sum();
    // 21 frames at 16 FPS = 1312.5 ms; GIF delays are whole centiseconds, boundaries rounded.
    assert_eq!(total_ms, 1310);
    for (i, f) in decoded.iter().enumerate() {
        let rgb = image::DynamicImage::ImageRgba8(f.buffer().clone()).into_rgb8();
        assert_halves(rgb.as_raw(), 32, 32, i, 8.0);
    }
}

#[test]
fn png_directory_holds_exact_frames() {
    let scratch = Scratch::new("png_dir");
    let dir = scratch.path().join("frames");
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join("frame_00007.png"), b"stale").unwrap();
    fs::write(dir.join("notes.txt"), b"keep").unwrap();
    let mut sink = VideoSink::create(&dir).unwrap();
    assert!(!dir.join("frame_00007.png").exists());
    sink.push_frames(&frames(0..3, 5, 3)).unwrap();
    sink.push_frames(&frames(3..5, 5, 3)).unwrap();
    assert_eq!(sink.finish().unwrap(), dir);
    let mut names: Vec<_> = fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    names.sort();
    let expected: Vec<_> = (0..5).map(|i| format!("frame_{i:05}.png")).chain(["notes.txt".to_string()]).collect();
    assert_eq!(names, expected);
    for i in 0..5 {
        let img = image::open(dir.join(format!("frame_{i:05}.png"))).unwrap().into_rgb8();
        assert_eq!(img.dimensions(), (5, 3));
        assert_eq!(img.as_raw(), frame(i, 5, 3).as_raw(), "frame {i} is lossless");
    }
}

#[test]
fn png_path_names_frames_after_its_stem() {
    let scratch = Scratch::new("png_pattern");
    let dir = scratch.path();
    let mut sink = VideoSink::create(&dir.join("clip.png")).unwrap();
    sink.push_frames(&frames(0..2, 4, 4)).unwrap();
    assert_eq!(sink.finish().unwrap(), dir.join("clip_%05d.png"));
    assert!(dir.join("clip_00000.png").is_file() && dir.join("clip_00001.png").is_file());
    assert!(!dir.join("clip_00002.png").exists());
}

#[test]
fn unknown_extensions_and_size_changes_are_errors() {
    let scratch = Scratch::new("errors");
    let dir = scratch.path();
    let err = VideoSink::create(&dir.join("clip.webm")).err().unwrap().to_string();
    assert!(err.contains(".webm") && err.contains(".mp4"), "{err}");
    let mut sink = VideoSink::create(&dir.join("clip.gif")).unwrap();
    sink.push_frames(&frames(0..1, 8, 8)).unwrap();
    let err = sink.push_frames(&frames(1..2, 8, 6)).unwrap_err().to_string();
    assert!(err.contains("frame 1 is 8x6 but the video is 8x8"), "{err}");
}

#[test]
fn the_output_is_checked_before_any_work_without_touching_old_files() {
    let scratch = Scratch::new("check");
    let dir = scratch.path();
    let old = dir.join("clip.mp4");
    fs::write(&old, b"an older video").unwrap();
    for ok in [old.clone(), dir.join("new/sub/clip.gif"), dir.join("frames/"), dir.join("shot.png")] {
        VideoSink::check(&ok).unwrap();
    }
    assert_eq!(fs::read(&old).unwrap(), b"an older video", "check leaves existing outputs alone");
    let mut left: Vec<String> = fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    left.sort();
    assert_eq!(left, ["clip.mp4", "frames", "new"], "no probe file is left behind");

    let err = format!("{:#}", VideoSink::check(&dir.join("clip.avi")).unwrap_err());
    assert!(err.contains("unsupported video output `.avi`"), "{err}");
    // a directory that cannot be made (its parent is a file), a name the file system refuses
    let err = format!("{:#}", VideoSink::check(&old.join("x.mp4")).unwrap_err());
    assert!(err.contains("cannot create the directory"), "{err}");
    let long = dir.join(format!("{}.mp4", "a".repeat(250)));
    let err = format!("{:#}", VideoSink::check(&long).unwrap_err());
    assert!(err.contains("cannot write"), "{err}");
}
