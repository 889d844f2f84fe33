//! `train vae` end to end on the CPU at a tiny size: one step from the shared fixture codec,
//! inflated (`[vae] inflate = true`, the video run that follows a run on single frames), exports
//! `RUN/vae/` in the layout `generate --vae` reads; inflating without a starting codec is refused.
//! A wider decoder on the fixture's frozen encoder (`[vae] new_decoder`, `trainable = "decoder"`)
//! keeps its latent statistics, and `vae export --half` of that run needs the encoder it started
//! from and writes half the bytes.

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

#[test]
fn a_wider_decoder_on_a_frozen_encoder_exports_in_half_precision() {
    let root = Scratch::new("train-vae-decoder");
    let start = root.0.join("start");
    fs::create_dir_all(&start).unwrap();
    let mut start_config = fixture_config("wan_vae_tiny");
    start_config["latents_mean"] = serde_json::json!(vec![0.25; 16]);
    start_config["latents_std"] = serde_json::json!(vec![2.0; 16]);
    fs::write(start.join("config.json"), start_config.to_string()).unwrap();
    fs::copy(fixtures().join("wan_vae_tiny/weights_diffusers.safetensors"), start.join("diffusion_pytorch_model.safetensors")).unwrap();
    let config = root.0.join("decoder.toml");
    fs::write(
        &config,
        "[train]\nwarmup_steps = 1\nbatch = 1\ntrainable = \"decoder\"\n[vae]\nnew_decoder = true\ninflate = true\nstats_clips = 1\n\
         [vae.model]\ndecoder_base_dim = 16\n[vae.clips]\nframes = 5\nwidth = 16\nheight = 16\n",
    )
    .unwrap();
    let out = root.0.join("run");
    let refused = run(&["train", "vae", "--config", s(&config), "--out", s(&out), "--steps", "1"]);
    assert!(!refused.status.success() && String::from_utf8_lossy(&refused.stderr).contains("--model-dir"));
    let done = run(&["train", "vae", "--config", s(&config), "--model-dir", s(&start), "--out", s(&out), "--steps", "1"]);
    assert!(done.status.success(), "{}", String::from_utf8_lossy(&done.stderr));
    let read = |dir: &Path| -> serde_json::Value { serde_json::from_str(&fs::read_to_string(dir.join("config.json")).unwrap()).unwrap() };
    let exported = read(&out.join("vae"));
    assert_eq!(exported["decoder_base_dim"], 16);
    assert_eq!((&exported["latents_mean"], &exported["latents_std"]), (&start_config["latents_mean"], &start_config["latents_std"]));

    let half = root.0.join("half");
    let no_encoder = run(&["vae", "export", "--run", s(&out), "--out", s(&half), "--half"]);
    assert!(!no_encoder.status.success() && String::from_utf8_lossy(&no_encoder.stderr).contains("--encoder"));
    let exported_half = run(&["vae", "export", "--run", s(&out), "--encoder", s(&start), "--out", s(&half), "--half"]);
    assert!(exported_half.status.success(), "{}", String::from_utf8_lossy(&exported_half.stderr));
    assert_eq!(read(&half), exported);
    let size = |dir: &Path| fs::metadata(dir.join("diffusion_pytorch_model.safetensors")).unwrap().len() as f64;
    let ratio = size(&half) / size(&out.join("vae"));
    assert!((0.45..0.55).contains(&ratio), "f16 / f32 size {ratio}");
    let eval = run(&["vae", "eval", "--vae", s(&half), "--clips", "1", "--seconds", "0", "--json"]);
    assert!(eval.status.success(), "{}", String::from_utf8_lossy(&eval.stderr));
}
