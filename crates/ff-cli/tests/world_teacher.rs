//! The small world's teacher chain end to end on the CPU, at tiny sizes: `world text` (tokenizer
//! and frozen encoder) → `world latents` (with the reference fixture's random VAE, one-frame clips;
//! a rerun adds nothing) → `train teacher` (2 steps, exports `RUN/transformer/`) → `generate
//! --schedule bidirectional --steps N --guidance g`, whose DiT forwards are 2N with guidance and
//! N without, over the σ grid of `--sample-shift`; `--steps` with another schedule is refused. A run with `[teacher] init` starts
//! from an exported teacher, and with `layers` grows it without changing what it draws.

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

fn ok(args: &[&str]) -> (String, String) {
    let output = run(args);
    assert!(output.status.success(), "{args:?} failed: {}", String::from_utf8_lossy(&output.stderr));
    (String::from_utf8_lossy(&output.stdout).into(), String::from_utf8_lossy(&output.stderr).into())
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn world_text_latents_teacher_and_guided_sampling() {
    let root = Scratch::new("world-teacher");
    let model = root.0.join("model");
    ok(&["world", "text", "--out", s(&model)]);
    fs::create_dir_all(model.join("vae")).unwrap();
    fs::write(model.join("vae/config.json"), fixture_config("wan_vae_tiny").to_string()).unwrap();
    fs::copy(fixtures().join("wan_vae_tiny/weights_diffusers.safetensors"), model.join("vae/diffusion_pytorch_model.safetensors")).unwrap();

    let data = root.0.join("data");
    let latents = ["world", "latents", "--model-dir", s(&model), "--out", s(&data), "--clips", "2", "--seconds", "0"];
    let (out, _) = ok(&[&latents[..], &["--clips-per-shard", "1"]].concat());
    assert!(out.contains("2 clips (2 added)"), "{out}");
    let (out, _) = ok(&latents);
    assert!(out.contains("2 clips (0 added)"), "a rerun resumes: {out}");

    let config = root.0.join("teacher.toml");
    fs::write(&config, "[train]\nbatch = 2\nwarmup_steps = 1\ncheckpoint_every = 1\n[teacher]\ntext_dropout = 0.5\n").unwrap();
    let run_dir = root.0.join("run");
    let train = |out: &Path, steps: &str, config: &Path, extra: &[&str]| {
        let args = ["train", "teacher", "--model-dir", s(&model), "--data", s(&data), "--out", s(out), "--steps", steps];
        ok(&[&args[..], &["--seed", "1", "--config", s(config)], extra].concat()).0
    };
    let out = train(&run_dir, "2", &config, &[]);
    assert!(out.trim_end().ends_with("transformer"), "{out}");

    // `[teacher] init` starts a run from an export: with a zero rate and a frozen EMA (decay 1,
    // no warm-up, which would average the weights with themselves in rounded steps) its own
    // export is the one it started from, byte for byte; from random weights it is not.
    let weights = |run: &Path| fs::read(run.join("transformer/diffusion_pytorch_model.safetensors")).unwrap();
    for (name, init) in [("continued", Some(run_dir.join("transformer"))), ("fresh", None)] {
        let config = root.0.join(format!("{name}.toml"));
        let init = init.map(|p| format!("init = {:?}\n", s(&p))).unwrap_or_default();
        fs::write(&config, format!("[train]\nbatch = 2\nlr = 0.0\nema_decay = 1.0\nema_warmup = false\n[teacher]\n{init}")).unwrap();
        let out = root.0.join(name);
        train(&out, "1", &config, &[]);
        assert_eq!(weights(&out) == weights(&run_dir), name == "continued", "{name}");
    }
    fs::create_dir_all(model.join("transformer")).unwrap();
    for f in ["config.json", "diffusion_pytorch_model.safetensors"] {
        fs::copy(run_dir.join("transformer").join(f), model.join("transformer").join(f)).unwrap();
    }

    let video = root.0.join("x.mp4");
    let generate_with = |steps: &str, guidance: &str, schedule: &str, extra: &[&str]| {
        let args = [
            "generate",
            "--model-dir",
            s(&model),
            "--prompt",
            "a red ball slides left",
            "--latents",
            "1",
            "--height",
            "64",
            "--width",
            "64",
            "--schedule",
            schedule,
            "--steps",
            steps,
            "--guidance",
            guidance,
            "--out",
            s(&video),
        ];
        run(&[&args[..], extra].concat())
    };
    let generate = |steps: &str, guidance: &str, schedule: &str| generate_with(steps, guidance, schedule, &[]);
    for (guidance, forwards) in [("3", "6 DiT forwards"), ("1", "3 DiT forwards")] {
        let output = generate("3", guidance, "bidirectional");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success() && stderr.contains(forwards), "guidance {guidance}: {stderr}");
        assert!(String::from_utf8_lossy(&output.stdout).contains("1 frames"));
    }
    let output = generate("3", "3", "flashforward");
    assert!(!output.status.success() && String::from_utf8_lossy(&output.stderr).contains("--schedule bidirectional"));
    let output = generate_with("3", "3", "bidirectional", &["--sample-shift", "0"]);
    assert!(!output.status.success() && String::from_utf8_lossy(&output.stderr).contains("--sample-shift 0"));
    let output = generate_with("3", "3", "bidirectional", &["--sample-shift", "2"]);
    assert!(output.status.success() && String::from_utf8_lossy(&output.stderr).contains("3 Euler steps (shift 2)"));

    // A teacher grown from the export to twice the depth (`--init` + `[teacher] layers`; zero
    // rate, frozen EMA) draws the same video, and its export has the new depth.
    let drawn = || {
        let output = generate("2", "1", "bidirectional");
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        fs::read(&video).unwrap()
    };
    let before = drawn();
    let config = root.0.join("grown.toml");
    fs::write(&config, "[train]\nbatch = 2\nlr = 0.0\nema_decay = 1.0\nema_warmup = false\n[teacher]\nlayers = 8\n").unwrap();
    let grown = root.0.join("grown");
    train(&grown, "1", &config, &["--init", s(&model.join("transformer"))]);
    let exported: serde_json::Value = serde_json::from_slice(&fs::read(grown.join("transformer/config.json")).unwrap()).unwrap();
    assert_eq!(exported["num_layers"], 8, "{exported}");
    for f in ["config.json", "diffusion_pytorch_model.safetensors"] {
        fs::copy(grown.join("transformer").join(f), model.join("transformer").join(f)).unwrap();
    }
    assert_eq!(drawn(), before, "the grown teacher draws the same video");
}
