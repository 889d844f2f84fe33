//! `flashforward world clips` and `flashforward eval` end to end: the domain's MP4 clips score perfectly
//! against their own captions after an H.264 round trip, badly against wrong ones, and a video
//! drawn by another tool (ffmpeg's lavfi `overlay` of a colour source, x264 at 24 FPS) is measured too.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn flashforward(args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_flashforward")).args(args).output().expect("run flashforward");
    assert!(out.status.success(), "flashforward {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    out
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ff-world-e2e-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

fn eval(videos: &[PathBuf], prompts: &Path) -> serde_json::Value {
    let mut args: Vec<String> = vec!["eval".into()];
    args.extend(videos.iter().map(|v| v.display().to_string()));
    args.extend(["--prompts".into(), prompts.display().to_string(), "--json".into()]);
    json(&flashforward(&args.iter().map(String::as_str).collect::<Vec<_>>()))
}

#[test]
fn world_clips_score_against_their_captions_after_h264() {
    let dir = scratch("clips");
    let d = dir.display().to_string();
    flashforward(&["world", "clips", "--out", &d, "--clips", "6", "--seconds", "5", "--seed", "11"]);
    let rows: Vec<serde_json::Value> =
        std::fs::read_to_string(dir.join("captions.jsonl")).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(rows.len(), 6);
    let videos: Vec<PathBuf> = rows.iter().map(|r| dir.join(r["video"].as_str().unwrap())).collect();
    let captions: Vec<&str> = rows.iter().map(|r| r["caption"].as_str().unwrap()).collect();
    std::fs::write(dir.join("prompts.txt"), captions.join("\n")).unwrap();
    let right = eval(&videos, &dir.join("prompts.txt"));
    assert_eq!(right["per_video"].as_array().unwrap().len(), 6);
    assert!(right["prompt_accuracy"].as_f64().unwrap() > 0.99, "{right}");
    assert!(right["identity_persistence"].as_f64().unwrap() > 0.99, "{right}");
    // Every video against the next one's caption: what it gets right is chance, not the rule.
    let shifted: Vec<&str> = captions.iter().cycle().skip(1).take(6).copied().collect();
    std::fs::write(dir.join("shifted.txt"), shifted.join("\n")).unwrap();
    let wrong = eval(&videos, &dir.join("shifted.txt"));
    assert!(wrong["prompt_accuracy"].as_f64().unwrap() < 0.7, "{wrong}");
    // A rerun keeps the clips on disk and writes the same captions.
    let before = std::fs::read(dir.join("captions.jsonl")).unwrap();
    let out = flashforward(&["world", "clips", "--out", &d, "--clips", "6", "--seconds", "5", "--seed", "11"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("0 written, 6 kept"));
    assert_eq!(std::fs::read(dir.join("captions.jsonl")).unwrap(), before);
    // Another seed into the same folder would keep clips that match none of its captions: refused.
    let other = Command::new(env!("CARGO_BIN_EXE_flashforward"))
        .args(["world", "clips", "--out", &d, "--clips", "8", "--seconds", "5", "--seed", "12"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&other.stderr);
    assert!(!other.status.success() && err.contains("\"seed\":11") && err.contains("another --out"), "{err}");
    assert_eq!(std::fs::read(dir.join("captions.jsonl")).unwrap(), before);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_square_drawn_by_ffmpeg_is_measured() {
    let dir = scratch("ffmpeg");
    let video = dir.join("square.mp4");
    let status = Command::new("ffmpeg")
        .args(["-v", "error", "-y", "-f", "lavfi", "-i", "color=c=0x202020:s=96x64:r=24:d=5"])
        .args(["-f", "lavfi", "-i", "color=c=0x2050F0:s=18x18:r=24:d=5", "-filter_complex", "[0][1]overlay=x='8+10*t':y=20"])
        .args(["-c:v", "libx264", "-pix_fmt", "yuv420p"])
        .arg(&video)
        .status()
        .expect("ffmpeg is installed (.ci/run installs it)");
    assert!(status.success());
    let out = json(&flashforward(&[
        "eval",
        &video.display().to_string(),
        "--prompt",
        "a blue square moves right on a black background",
        "--json",
    ]));
    assert_eq!(out["prompt_accuracy"].as_f64(), Some(1.0), "{out}");
    assert_eq!(out["identity_persistence"].as_f64(), Some(1.0), "{out}");
    for cause in ["lost", "extra", "shape", "colour"] {
        assert_eq!(out["identity_failures"][cause].as_f64(), Some(0.0), "{cause}: {out}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
