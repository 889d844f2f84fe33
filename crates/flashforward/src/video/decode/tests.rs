//! Decoding MP4s written by the project's own sink and by ffmpeg (libx264, B-frames), against
//! the frames that went in (sink) and ffmpeg's own decode; and the crop/resize geometry.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use super::*;
use crate::video::VideoSink;
use crate::video::tests::Scratch;

/// A smooth pattern that moves with `t` (H.264 keeps it at > 30 dB).
fn moving(t: usize, width: usize, height: usize) -> Frame {
    let rgb = (0..height)
        .flat_map(|y| (0..width).map(move |x| (x, y)))
        .flat_map(|(x, y)| {
            let u = (x + 3 * t) as f32 / width as f32;
            let v = y as f32 / height as f32;
            let wave = |p: f32| (127.5 + 100.0 * (std::f32::consts::TAU * p).sin()) as u8;
            [wave(u), wave(v + 0.3 * u), wave(0.5 * u - v + 0.1 * t as f32)]
        })
        .collect();
    crate::video::frame::frame(width, height, rgb).unwrap()
}

fn psnr(a: &Frame, b: &Frame) -> f64 {
    assert_eq!((a.width(), a.height()), (b.width(), b.height()));
    let mse =
        a.as_raw().iter().zip(b.as_raw()).map(|(x, y)| (f64::from(*x) - f64::from(*y)).powi(2)).sum::<f64>() / a.as_raw().len() as f64;
    10.0 * (255.0f64.powi(2) / mse.max(1e-9)).log10()
}

/// Each decoded frame is close to its reference, and closer to it than to the neighbours.
fn assert_frames_match(decoded: &[Frame], reference: &[Frame], min_psnr: f64) {
    assert_eq!(decoded.len(), reference.len());
    for (i, frame) in decoded.iter().enumerate() {
        let own = psnr(frame, &reference[i]);
        assert!(own > min_psnr, "frame {i}: {own:.1} dB");
        for j in [i.wrapping_sub(1), i + 1].into_iter().filter(|&j| j < reference.len()) {
            let other = psnr(frame, &reference[j]);
            assert!(own > other + 1.0, "frame {i} is as close to reference {j}: {own:.1} vs {other:.1} dB");
        }
    }
}

#[test]
fn sink_mp4s_decode_back_to_their_frames() {
    let scratch = Scratch::new("decode_sink");
    let path = scratch.path().join("clip.mp4");
    let originals: Vec<Frame> = (0..9).map(|t| moving(t, 48, 32)).collect();
    let mut sink = VideoSink::create(&path).unwrap();
    sink.push_frames(&originals[..1]).unwrap();
    sink.push_frames(&originals[1..]).unwrap();
    sink.finish().unwrap();

    let input = Mp4Input::open(&path).unwrap();
    assert_eq!((input.size(), input.frames_at_fps()), ((48, 32), 9));
    let decoded = input.read_frames(9, 48, 32).unwrap();
    assert_frames_match(&decoded, &originals, 28.0);
    // A prefix is the same frames; more than the video holds is refused.
    assert_eq!(Mp4Input::open(&path).unwrap().read_frames(4, 48, 32).unwrap(), decoded[..4]);
    let err = Mp4Input::open(&path).unwrap().read_frames(10, 48, 32).unwrap_err().to_string();
    assert!(err.contains("10 frames at 16 FPS requested, the video has 9"), "{err}");
    // Resized: the same as fitting the full-size decode.
    let small = Mp4Input::open(&path).unwrap().read_frames(9, 16, 16).unwrap();
    assert_eq!(small, decoded.iter().map(|f| fit(f, 16, 16).unwrap()).collect::<Vec<_>>());

    let err = Mp4Input::open(&scratch.path().join("absent.mp4")).err().unwrap().to_string();
    assert!(err.contains("cannot open") && err.contains("absent.mp4"), "{err}");
    std::fs::write(scratch.path().join("junk.mp4"), b"not a video at all").unwrap();
    let err = Mp4Input::open(&scratch.path().join("junk.mp4")).err().unwrap().to_string();
    assert!(err.contains("junk.mp4 is not a readable MP4"), "{err}");
}

/// Runs ffmpeg with `input` on its stdin; returns its stdout.
fn ffmpeg(args: &[&str], input: &[u8]) -> Vec<u8> {
    let mut child = Command::new("ffmpeg")
        .args(["-hide_banner", "-loglevel", "error", "-y"])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ffmpeg is needed by this test (apt-get install -y ffmpeg; .ci/run installs it)");
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(out.status.success(), "ffmpeg {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    out.stdout
}

/// Encodes `frames` (raw RGB at `rate` FPS) with libx264, B-frames on, into `path`.
fn x264(path: &Path, frames: &[Frame], rate: u32) {
    let (size, rate) = (format!("{}x{}", frames[0].width(), frames[0].height()), rate.to_string());
    let raw: Vec<u8> = frames.iter().flat_map(|f| f.as_raw().iter().copied()).collect();
    let input = ["-f", "rawvideo", "-pix_fmt", "rgb24", "-s", &size, "-r", &rate, "-i", "-"];
    ffmpeg(&[&input[..], &["-c:v", "libx264", "-pix_fmt", "yuv420p", "-bf", "2", path.to_str().unwrap()]].concat(), &raw);
}

#[test]
fn ffmpeg_mp4s_decode_like_ffmpeg_and_resample_to_16_fps() {
    let scratch = Scratch::new("decode_ffmpeg");
    // 32 FPS with B-frames (libx264's High profile): output frame k is picture 2k.
    let path = scratch.path().join("x264.mp4");
    x264(&path, &(0..32).map(|t| moving(t, 64, 48)).collect::<Vec<_>>(), 32);
    let raw = ffmpeg(&["-i", path.to_str().unwrap(), "-f", "rawvideo", "-pix_fmt", "rgb24", "-"], &[]);
    let reference: Vec<Frame> =
        raw.chunks_exact(64 * 48 * 3).step_by(2).map(|c| crate::video::frame::frame(64, 48, c.to_vec()).unwrap()).collect();
    assert_eq!(reference.len(), 16);

    let input = Mp4Input::open(&path).unwrap();
    assert_eq!((input.size(), input.frames_at_fps()), ((64, 48), 16));
    let decoded = input.read_frames(16, 64, 48).unwrap();
    // Same bitstream, two decoders: only the YUV to RGB conversions differ.
    assert_frames_match(&decoded, &reference, 30.0);

    // 30 FPS for 2 s: 60 pictures cover 32 frames at 16 FPS.
    let path = scratch.path().join("30fps.mp4");
    x264(&path, &(0..60).map(|t| moving(t, 40, 30)).collect::<Vec<_>>(), 30);
    let input = Mp4Input::open(&path).unwrap();
    assert_eq!(input.frames_at_fps(), 32);
    assert_eq!(input.read_frames(32, 16, 16).unwrap().len(), 32);
}

/// A `width × height` frame coloured by `f(x, y)`.
fn painted(width: usize, height: usize, f: impl Fn(usize, usize) -> [u8; 3]) -> Frame {
    let rgb = (0..height).flat_map(|y| (0..width).map(move |x| (x, y))).flat_map(|(x, y)| f(x, y)).collect();
    crate::video::frame::frame(width, height, rgb).unwrap()
}

#[test]
fn fit_crops_the_centre_then_resizes() {
    let [red, green, blue]: [[u8; 3]; 3] = [[250, 10, 10], [10, 250, 10], [10, 10, 250]];
    let thirds = |i: usize, n: usize| [red, green, blue][3 * i / n];
    // Wide 60x20 (R | G | B columns) to a square: the centre 20x20, all green, halved.
    let wide = painted(60, 20, |x, _| thirds(x, 60));
    assert_eq!(fit(&wide, 10, 10).unwrap(), painted(10, 10, |_, _| green));
    // Tall 20x60 (R / G / B rows) to 10x10: the middle rows.
    let tall = painted(20, 60, |_, y| thirds(y, 60));
    assert_eq!(fit(&tall, 10, 10).unwrap(), painted(10, 10, |_, _| green));
    // Same aspect, twice the size: no crop, each third stays in place.
    let grown = fit(&wide, 120, 40).unwrap();
    let at = |x: usize, y: usize| &grown.as_raw()[3 * (y * 120 + x)..][..3];
    assert_eq!((at(10, 20), at(60, 20), at(110, 20)), (&red[..], &green[..], &blue[..]));
    // Exactly the target size: untouched.
    let pattern = moving(1, 32, 16);
    assert_eq!(fit(&pattern, 32, 16).unwrap(), pattern);
    // An odd margin: 7x4 to 4x4 keeps columns 1..5 (the margin rounds down on the left).
    let columns = painted(7, 4, |x, _| [x as u8 * 30; 3]);
    let square = fit(&columns, 4, 4).unwrap();
    assert_eq!(square, painted(4, 4, |x, _| [(x as u8 + 1) * 30; 3]));
}
