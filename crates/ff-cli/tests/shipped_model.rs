//! The small world's shipped models in `models/world/` of this checkout, checked by
//! `flashforward eval` at thresholds well below their quality gates (prompt accuracy ≥ 90 %,
//! identity persistence ≥ 95 %), so that noise does not flake but a broken or untrained model
//! fails: the default model (the FlashForward student in `transformer/`, trained by
//! `scripts/train-default.sh`), run as README's main command with no model flags, and the teacher
//! (`teacher/`, trained by `scripts/train-world.sh`) with its 50-step CFG sampler. The same seed
//! gives the same MP4 bytes.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

mod common;
use common::Scratch;

/// Prompts over every shape, several colours, backgrounds and motions; each pairs a colour with a
/// background the domain admits (`ff_world::vocab::Background::admits`: blue on gray, say, is
/// never drawn, so no model of the domain has seen it).
const PROMPTS: [&str; 6] = [
    "a red circle bounces on a black background",
    "a green square moves left on a white background",
    "a yellow triangle moves up on a dark blue background",
    "a white circle moves right on a gray background",
    "a purple square moves down on a black background",
    "an orange triangle bounces on a white background",
];
/// Mean prompt accuracy and identity persistence each model's clips must reach (the gates: 0.90,
/// 0.95).
struct Thresholds {
    prompt_accuracy: f64,
    identity: f64,
}
const TEACHER: Thresholds = Thresholds { prompt_accuracy: 0.6, identity: 0.5 };
const STUDENT: Thresholds = Thresholds { prompt_accuracy: 0.6, identity: 0.5 };

fn model() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../models/world")
}

fn flashforward(args: &[&str]) -> Output {
    let output = Command::new(env!("CARGO_BIN_EXE_flashforward")).args(args).env_remove("FF_MODEL_DIR").output().unwrap();
    assert!(output.status.success(), "flashforward {args:?} failed: {}", String::from_utf8_lossy(&output.stderr));
    output
}

/// `eval` of `videos` against `PROMPTS`, checked against `min`.
fn assert_scores(scratch: &Scratch, videos: &[PathBuf], min: &Thresholds) {
    let prompts = scratch.0.join("prompts.txt");
    std::fs::write(&prompts, PROMPTS.join("\n")).unwrap();
    let mut args = vec!["eval"];
    args.extend(videos.iter().map(|v| v.to_str().unwrap()));
    args.extend(["--prompts", prompts.to_str().unwrap(), "--json"]);
    let report: serde_json::Value = serde_json::from_slice(&flashforward(&args).stdout).unwrap();
    let metric = |key: &str| report[key].as_f64().unwrap_or_else(|| panic!("no {key} in {report}"));
    assert!(metric("prompt_accuracy") >= min.prompt_accuracy, "prompt accuracy below {}: {report}", min.prompt_accuracy);
    assert!(metric("identity_persistence") >= min.identity, "identity persistence below {}: {report}", min.identity);
}

/// Generates every prompt of `PROMPTS` with `generate(prompt, out, seed)` (seed 0), checks
/// that the first repeats itself by seed and differs with another, and returns the videos.
fn videos_of(scratch: &Scratch, generate: impl Fn(&str, &Path, &str) -> Vec<u8>) -> Vec<PathBuf> {
    let mut videos = Vec::new();
    for (i, prompt) in PROMPTS.iter().enumerate() {
        let video = scratch.0.join(format!("clip-{i}.mp4"));
        let bytes = generate(prompt, &video, "0");
        if i == 0 {
            assert_eq!(bytes, generate(prompt, &scratch.0.join("again.mp4"), "0"), "the same seed gives the same MP4 bytes");
            assert_ne!(bytes, generate(prompt, &scratch.0.join("seed-1.mp4"), "1"), "another seed, another video");
        }
        videos.push(video);
    }
    videos
}

/// README's main command: `generate --prompt P --seconds 5 --out X` with no model flag reads
/// the default model of this checkout.
#[test]
fn the_default_model_draws_its_prompts_with_no_model_flags() {
    let scratch = Scratch::new("shipped-default");
    let videos = videos_of(&scratch, |prompt, out, seed| {
        flashforward(&["generate", "--prompt", prompt, "--seconds", "5", "--seed", seed, "--out", out.to_str().unwrap()]);
        std::fs::read(out).unwrap()
    });
    assert_scores(&scratch, &videos, &STUDENT);
}

#[test]
fn the_shipped_teacher_draws_its_prompts_and_repeats_itself_by_seed() {
    let scratch = Scratch::new("shipped-teacher");
    let m = model();
    let file = |p: &str| m.join(p).to_str().unwrap().to_string();
    let files = [
        ("--dit", file("teacher")),
        ("--dit-config", file("teacher/config.json")),
        ("--vae", file("vae/diffusion_pytorch_model.safetensors")),
        ("--vae-config", file("vae/config.json")),
        ("--text-encoder", file("text_encoder")),
        ("--text-encoder-config", file("text_encoder/config.json")),
        ("--tokenizer", file("tokenizer/tokenizer.json")),
    ];
    let generate = |prompt: &str, out: &Path, seed: &str| {
        let mut args = vec!["generate", "--prompt", prompt, "--seconds", "5", "--height", "64", "--width", "64", "--seed", seed];
        args.extend(["--schedule", "bidirectional", "--steps", "50", "--guidance", "3", "--out", out.to_str().unwrap()]);
        args.extend(files.iter().flat_map(|(flag, path)| [*flag, path.as_str()]));
        flashforward(&args);
        std::fs::read(out).unwrap()
    };
    let videos = videos_of(&scratch, generate);
    assert_scores(&scratch, &videos, &TEACHER);
}
