//! `train vae` end to end on the CPU at a tiny size: one step from the shared fixture codec,
//! inflated (`[vae] inflate = true`, the video run that follows a run on single frames), exports
//! `RUN/vae/` in the layout `generate --vae` reads; inflating without a starting codec is refused.

use std::fs;
use std::path::Path;
use std::process::{Command, Output};

mod common;

use common::{Scratch, fixture_config, fixtures};

fn run(args: &[&str]) -> Output {
    let output = Command::new(env!("CARGO_BIN_EXE_flashforward")).args(args).output().unwrap();
    eprintln!("{}", String::from_utf8_lossy(&output.stderr));
    output
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn one_inflated_step_from_an_exported_codec_exports_a_codec() {
    let root = Scratch::new("train-vae");
    let start = root.0.join("start");
    fs::create_dir_all(&start).unwrap();
    fs::write(start.join("config.json"), fixture_config("wan_vae_tiny").to_string()).unwrap();
    fs::copy(fixtures().join("wan_vae_tiny/weights_diffusers.safetensors"), start.join("diffusion_pytorch_model.safetensors")).unwrap();
    let config = root.0.join("video.toml");
    fs::write(
        &config,
        "[train]\nwarmup_steps = 1\nbatch = 1\n[vae]\ninflate = true\nstats_clips = 1\n[vae.clips]\nframes = 5\nwidth = 16\nheight = 16\n",
    )
    .unwrap();

    let out = root.0.join("run");
    let refused = run(&["train", "vae", "--config", s(&config), "--out", s(&out), "--steps", "1"]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success() && stderr.contains("inflate") && stderr.contains("--model-dir"), "{stderr}");

    let done = run(&["train", "vae", "--config", s(&config), "--model-dir", s(&start), "--out", s(&out), "--steps", "1"]);
    assert!(done.status.success(), "{}", String::from_utf8_lossy(&done.stderr));
    let exported: serde_json::Value = serde_json::from_str(&fs::read_to_string(out.join("vae/config.json")).unwrap()).unwrap();
    assert_eq!(exported["z_dim"], 16);
    assert!(fs::metadata(out.join("vae/diffusion_pytorch_model.safetensors")).unwrap().len() > 100_000);
    let effective = fs::read_to_string(out.join("config.toml")).unwrap();
    assert!(effective.contains("inflate = true"), "{effective}");
}
