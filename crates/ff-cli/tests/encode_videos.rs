//! `flashforward encode-videos` end to end on the CPU with the tiny models of `common`: H.264 MP4s
//! made by ffmpeg (several sizes and frame rates; the project's own MP4 sink is covered by the
//! decoder's unit tests) encoded into a dataset that `ShardDataset` reads; the latents are checked
//! against the VAE run here on ffmpeg's decode of the same MP4, the prompt embeddings against umT5
//! run here.
//! Then resuming, and bad input that must leave the dataset as it was.

use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use burn::backend::NdArray;
use burn::tensor::{Tensor, TensorData};
use ff_model::text::{PromptEncoderFiles, Umt5Config};
use ff_model::vae::{WanVae, WanVaeConfig};
use ff_train::data::{ClipSource, ShardDataset};

mod common;
use common::{Scratch, diffusers_dir, write};

fn flashforward<A: AsRef<OsStr>>(args: &[A]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_flashforward")).args(args).output().unwrap();
    eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    out
}

fn succeeds<A: AsRef<OsStr>>(args: &[A]) -> String {
    let out = flashforward(args);
    assert!(out.status.success(), "flashforward failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn fails<A: AsRef<OsStr>>(args: &[A]) -> String {
    let out = flashforward(args);
    assert!(!out.status.success(), "flashforward should have failed");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn ffmpeg(args: &[&str]) {
    let out = Command::new("ffmpeg")
        .args(["-hide_banner", "-loglevel", "error", "-y"])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("ffmpeg is needed by this test (apt-get install -y ffmpeg; .ci/run installs it)");
    assert!(out.status.success(), "ffmpeg {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// Moving colour waves as H.264 (libx264) MP4: `size` at `rate` FPS for `frames` frames.
fn test_pattern(path: &Path, size: &str, rate: u32, frames: usize) {
    let waves = "geq=r='128+100*sin(X/3+T*9)':g='128+100*cos(Y/2-T*7)':b='128+100*sin((X+Y)/4+T*5)'";
    let source = format!("nullsrc=size={size}:rate={rate},format=rgb24,{waves}");
    let frames = frames.to_string();
    ffmpeg(&["-f", "lavfi", "-i", &source, "-frames:v", &frames, "-c:v", "libx264", "-pix_fmt", "yuv420p", path.to_str().unwrap()]);
}

/// The PNG frames of a directory as a video `[1, 3, T, H, W]` in [-1, 1].
fn png_video(dir: &Path) -> Tensor<NdArray, 5> {
    let mut names: Vec<PathBuf> = fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    names.sort();
    let frames: Vec<image::RgbImage> = names.iter().map(|p| image::open(p).unwrap().to_rgb8()).collect();
    let (t, h, w) = (frames.len(), frames[0].height() as usize, frames[0].width() as usize);
    let mut values = vec![0f32; 3 * t * h * w];
    for (f, frame) in frames.iter().enumerate() {
        for (p, pixel) in frame.pixels().enumerate() {
            for c in 0..3 {
                values[(c * t + f) * h * w + p] = f32::from(pixel[c]) / 127.5 - 1.0;
            }
        }
    }
    Tensor::from_data(TensorData::new(values, [1, 3, t, h, w]), &Default::default())
}

fn distance(a: &TensorData, b: &TensorData) -> f32 {
    let (a, b) = (a.as_slice::<f32>().unwrap(), b.as_slice::<f32>().unwrap());
    a.iter().zip(b).map(|(x, y)| (x - y).powi(2)).sum::<f32>().sqrt()
}

const CAPTIONS: &str = r#"{"video": "fox.mp4", "caption": "a red fox runs in the snow"}
{"video": "wide.mp4", "caption": "the fox at night"}
{"video": "short.mp4", "caption": "a fox"}
"#;

#[test]
fn encodes_captioned_videos_into_a_resumable_dataset() {
    let scratch = Scratch::new("encode_videos");
    let root = &scratch.0;
    let (model, videos, data) = (root.join("model"), root.join("videos"), root.join("data"));
    diffusers_dir(&model);
    fs::create_dir_all(&videos).unwrap();
    // 16×16 at 16 FPS, 5 frames, and its frames as ffmpeg decodes them (the reference below).
    test_pattern(&videos.join("fox.mp4"), "16x16", 16, 5);
    let fox_frames = root.join("fox_frames");
    fs::create_dir_all(&fox_frames).unwrap();
    ffmpeg(&["-i", videos.join("fox.mp4").to_str().unwrap(), fox_frames.join("%03d.png").to_str().unwrap()]);
    // 2 s at 30 FPS, 48×32: resampled to 16 FPS, cropped to a square and shrunk.
    test_pattern(&videos.join("wide.mp4"), "48x32", 30, 60);
    // 3 frames at 16 FPS: shorter than L = 2 latents (5 frames).
    test_pattern(&videos.join("short.mp4"), "16x16", 16, 3);
    let captions = root.join("captions.jsonl");
    write(&captions, CAPTIONS);
    let (m, v, c, d) = (model.to_str().unwrap(), videos.to_str().unwrap(), captions.to_str().unwrap(), data.to_str().unwrap());
    let encode = |latents: &str, height: &str| -> Vec<String> {
        let base = ["encode-videos", "--model-dir", m, "--videos", v, "--captions", c, "--out", d, "--width", "16"];
        let more = ["--height", height, "--latents", latents, "--clips-per-shard", "1"];
        base.iter().chain(&more).map(|s| s.to_string()).collect()
    };

    let log = succeeds(&encode("2", "16"));
    assert!(log.contains("short.mp4: 3 frames at 16 FPS, L = 2 needs 5; skipped"), "{log}");
    let dataset = ShardDataset::open(&data).unwrap();
    assert_eq!(dataset.len(), 2);
    let sources: Vec<&str> = dataset.manifest().clips.iter().map(|c| c.source.as_str()).collect();
    assert_eq!(sources, ["fox.mp4", "wide.mp4"]);
    let [fox, wide] = [0, 1].map(|i| dataset.get(i).unwrap());
    assert_eq!((fox.latents.shape.to_vec(), fox.caption.as_str()), (vec![16, 2, 2, 2], "a red fox runs in the snow"));
    assert_eq!(dataset.manifest().clips[1].frame_size, [16, 16]);

    // Latents: the VAE run here on ffmpeg's decode of the same MP4 (the decoders differ by YUV to
    // RGB rounding); the same frames reversed, or another video, are far off.
    let device = Default::default();
    let config = WanVaeConfig::from_json(model.join("vae/config.json")).unwrap();
    let vae = WanVae::<NdArray>::load(model.join("vae/diffusion_pytorch_model.safetensors"), &config, &device).unwrap();
    let encode_frames = |video: Tensor<NdArray, 5>| vae.normalize(vae.encode_mean(video).unwrap()).reshape([16, 2, 2, 2]).into_data();
    let frames = png_video(&fox_frames);
    let reference = encode_frames(frames.clone());
    let off = |latents: &TensorData| distance(latents, &reference);
    let error = off(&fox.latents);
    let reversed = off(&encode_frames(frames.flip([2])));
    eprintln!("latent distance to the reference: {error}; reversed frames: {reversed}; wide.mp4: {}", off(&wide.latents));
    assert!(error < 0.1 * reversed, "relative error {error}, of the reversed frames {reversed}");
    assert!(off(&wide.latents) > 10.0 * error, "the other video has other latents");

    // Prompts: umT5's embedding of each caption (the binary runs Flex, the reference here
    // NdArray: equal up to f32 rounding; another caption is far off).
    let text = PromptEncoderFiles {
        tokenizer: model.join("tokenizer/tokenizer.json"),
        weights: model.join("text_encoder/model.safetensors"),
        config: Umt5Config::from_json(&model.join("text_encoder/config.json")).unwrap(),
        max_len: 512,
    };
    let embed = |caption: &str| text.embed::<NdArray>(&[caption], None, &device).unwrap().remove(0).data;
    for (clip, other) in [(&fox, &wide), (&wide, &fox)] {
        let (expected, elsewhere) = (embed(&clip.caption), embed(&other.caption));
        let scale = distance(&expected, &TensorData::new(vec![0.0f32; expected.num_elements()], expected.shape.clone()));
        assert!(distance(&clip.prompt, &expected) <= 1e-5 * scale, "{}", clip.caption);
        assert!(distance(&clip.prompt, &elsewhere) > 1e-2 * scale, "{} against {}", clip.caption, other.caption);
    }

    // Resume: encoded videos are skipped and their shards left alone; a new caption is added.
    let shard = fs::read(data.join("shard-00000.safetensors")).unwrap();
    write(&captions, format!("{CAPTIONS}{{\"video\": \"fox.mp4\", \"caption\": \"a fox in the snow\"}}\n"));
    let log = succeeds(&encode("2", "16"));
    assert!(log.contains("4 captioned videos: 2 already in") && log.contains("1 to encode"), "{log}");
    assert_eq!(fs::read(data.join("shard-00000.safetensors")).unwrap(), shard);
    let dataset = ShardDataset::open(&data).unwrap();
    assert_eq!(dataset.len(), 3);
    assert_eq!(dataset.get(2).unwrap().latents, fox.latents, "same video, same latents");

    // Bad input is refused before anything is written, and the dataset stays as it was.
    write(&captions, format!("{CAPTIONS}{{\"video\": \"gone.mp4\", \"caption\": \"a fox\"}}\n"));
    let err = fails(&encode("2", "16"));
    assert!(err.contains("captions.jsonl:4: caption without a video") && err.contains("gone.mp4"), "{err}");
    write(&captions, CAPTIONS);
    let err = fails(&encode("3", "16"));
    assert!(err.contains("holds clips of L = 2 at 16x16 px") && err.contains("L = 3"), "{err}");
    let err = fails(&encode("2", "24"));
    assert!(err.contains("--height 24 must be a positive multiple of 16"), "{err}");
    // A corrupt video stops the run with its name; the dataset keeps every clip.
    fs::write(videos.join("bad.mp4"), b"garbage").unwrap();
    write(&captions, format!("{CAPTIONS}{{\"video\": \"bad.mp4\", \"caption\": \"a fox\"}}\n"));
    let err = fails(&encode("2", "16"));
    assert!(err.contains("bad.mp4 is not a readable MP4"), "{err}");
    let dataset = ShardDataset::open(&data).unwrap();
    assert_eq!(dataset.len(), 3);
    assert_eq!(dataset.get(0).unwrap().latents, fox.latents);
}
