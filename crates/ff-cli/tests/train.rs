//! `flashforward train sft` end to end on the CPU: a tiny Wan-layout model directory (the
//! reference fixture DiT), a latent-clip dataset written with `ShardWriter`, a TOML config;
//! checks the run directory (checkpoints, metrics, loss curve, effective config), that a resumed
//! run is byte-identical to one that never stopped (and logs the runner's events under `-v`), and
//! the errors for bad configs and runs.

use std::fs;
use std::path::Path;
use std::process::{Command, Output};

mod common;

use common::{Scratch, setup_sft as setup, sft_args};

fn train(root: &Path, out: &str, extra: &[&str]) -> Output {
    train_on(root, "model", out, extra)
}

/// `train sft` with `--model-dir root/model`.
fn train_on(root: &Path, model: &str, out: &str, extra: &[&str]) -> Output {
    let output =
        Command::new(env!("CARGO_BIN_EXE_flashforward")).args(sft_args(root, model, out, extra)).env_remove("RUST_LOG").output().unwrap();
    eprintln!("{}", String::from_utf8_lossy(&output.stderr));
    output
}

fn ok(output: Output) -> String {
    assert!(output.status.success(), "train failed: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn err(output: Output) -> String {
    assert!(!output.status.success(), "train should fail");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn metrics(run: &Path) -> Vec<serde_json::Value> {
    fs::read_to_string(run.join("metrics.jsonl")).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// The losses of a run, step by step.
fn losses(run: &Path) -> Vec<f64> {
    metrics(run).iter().map(|r| r["loss"].as_f64().unwrap()).collect()
}

/// Runs `a` and `b` wrote the same step-4 checkpoint bytes and the same losses.
fn assert_same_run(a: &Path, b: &Path) {
    for file in ["model.safetensors", "ema.safetensors", "optimizer.safetensors"] {
        let (x, y) = (a.join("step-000004").join(file), b.join("step-000004").join(file));
        assert!(fs::read(x).unwrap() == fs::read(y).unwrap(), "{file} differs");
    }
    assert_eq!(losses(a), losses(b));
}

#[test]
fn trains_checkpoints_and_resumes_byte_identically() {
    let scratch = Scratch::new("resume");
    let root = &scratch.0;
    setup(root);
    let log = ok(train(root, "straight", &["--steps", "4"]));
    assert!(log.contains("effective config:") && log.contains("batch = 2") && log.contains("[sft]"), "{log}");
    assert!(!log.contains("INFO"), "without -v or RUST_LOG, warnings only: {log}");
    let straight = root.join("straight");
    let records = metrics(&straight);
    assert_eq!(records.iter().map(|r| r["step"].as_u64().unwrap()).collect::<Vec<_>>(), vec![1, 2, 3, 4]);
    assert!(records.iter().all(|r| r["loss"].as_f64().unwrap().is_finite() && r["lr"].as_f64().unwrap() == 1e-3));
    let svg = fs::read_to_string(straight.join("loss.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("polyline") && svg.contains("step 4"), "{svg}");
    let names = |run: &Path| {
        let mut n: Vec<String> = fs::read_dir(run).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        n.sort();
        n
    };
    assert_eq!(names(&straight), ["config.toml", "loss.svg", "metrics.jsonl", "step-000002", "step-000004"]);

    // 2 steps, stop, resume to 4 (the saved config.toml is the config): the same bytes. With -v
    // the runner's events are logged too.
    ok(train(root, "resumed", &["--steps", "2"]));
    let log =
        ok(train(root, "resumed", &["--steps", "4", "--resume", "--config", root.join("resumed/config.toml").to_str().unwrap(), "-v"]));
    assert!(log.contains("resumed from") && log.contains("after step 2"), "{log}");
    assert!(log.contains("ff_train::runner") && log.contains("step=3") && log.contains("checkpoint="), "-v: {log}");
    let resumed = root.join("resumed");
    assert_same_run(&straight, &resumed);
}

#[test]
fn trains_in_bf16_with_block_checkpointing_and_resumes_byte_identically() {
    // `--precision bf16` and `[train] checkpointing = "blocks"`: the effective config records
    // both, the checkpoints hold f32 master weights, and 2 + 2 resumed steps give the bytes of 4.
    let scratch = Scratch::new("bf16");
    let root = &scratch.0;
    setup(root);
    let config = root.join("bf16.toml");
    fs::write(&config, fs::read_to_string(root.join("sft.toml")).unwrap().replace("[train]\n", "[train]\ncheckpointing = \"blocks\"\n"))
        .unwrap();
    let args = |steps: &'static str| vec!["--steps", steps, "--precision", "bf16", "--config", config.to_str().unwrap()];
    let log = ok(train(root, "straight", &args("4")));
    assert!(log.contains("precision = \"bf16\"") && log.contains("checkpointing = \"blocks\""), "{log}");
    ok(train(root, "resumed", &args("2")));
    let saved = root.join("resumed/config.toml");
    ok(train(root, "resumed", &["--steps", "4", "--resume", "--config", saved.to_str().unwrap()]));
    let (straight, resumed) = (root.join("straight"), root.join("resumed"));
    assert_same_run(&straight, &resumed);
    let weights = safetensors::SafeTensors::deserialize(&fs::read(straight.join("step-000004/model.safetensors")).unwrap())
        .unwrap()
        .tensors()
        .into_iter()
        .map(|(_, t)| t.dtype())
        .collect::<Vec<_>>();
    assert!(!weights.is_empty() && weights.iter().all(|d| *d == safetensors::Dtype::F32), "{weights:?}");
    // Against f32: close (the library's 20-step test bounds it), not equal.
    ok(train(root, "f32", &["--steps", "4"]));
    let (half, full) = (losses(&straight), losses(&root.join("f32")));
    assert!(half != full && half.iter().zip(&full).all(|(a, b)| (a - b).abs() <= 0.05 * b), "bf16 {half:?}, f32 {full:?}");
}

#[test]
fn refuses_bad_configs_and_runs_with_clear_errors() {
    let scratch = Scratch::new("errors");
    let root = &scratch.0;
    setup(root);
    let bad = root.join("bad.toml");
    fs::write(&bad, "[train]\nbatch = 2\nlearning_rate = 1e-3\n").unwrap();
    let e = err(train(root, "run", &["--steps", "1", "--config", bad.to_str().unwrap()]));
    assert!(e.contains("unknown key `train.learning_rate` in [train]") && e.contains("bad.toml"), "{e}");
    let e = err(train(root, "run", &["--steps", "1", "--resume"]));
    assert!(e.contains("holds no checkpoint"), "{e}");
    ok(train(root, "run", &["--steps", "1"]));
    let e = err(train(root, "run", &["--steps", "2"]));
    assert!(e.contains("already holds a run") && e.contains("--resume"), "{e}");
    fs::write(&bad, "[train]\nbatch = 3\nmicro_batch = 2\n").unwrap();
    let e = err(train(root, "other", &["--steps", "1", "--config", bad.to_str().unwrap(), "--devices", "cpu"]));
    assert!(e.contains("batch 3"), "{e}");
}

#[test]
fn resume_refuses_another_model_dir_naming_both() {
    let scratch = Scratch::new("other-model");
    let root = &scratch.0;
    setup(root);
    ok(train(root, "run", &["--steps", "2"]));
    // Another backbone: the same files with one weight byte changed.
    let other = root.join("other-model");
    fs::create_dir_all(&other).unwrap();
    fs::copy(root.join("model/config.json"), other.join("config.json")).unwrap();
    let mut weights = fs::read(root.join("model/diffusion_pytorch_model.safetensors")).unwrap();
    *weights.last_mut().unwrap() ^= 0x40;
    fs::write(other.join("diffusion_pytorch_model.safetensors"), weights).unwrap();
    let log = err(train_on(root, "other-model", "run", &["--steps", "4", "--resume"]));
    assert!(
        log.contains("/model/diffusion_pytorch_model.safetensors") && log.contains("/other-model/diffusion_pytorch_model.safetensors"),
        "{log}"
    );
    assert!(log.contains("state.json") && log.contains("xxh3-128:"), "{log}");
    // The same weights in a moved directory resume.
    fs::rename(root.join("model"), root.join("moved")).unwrap();
    ok(train_on(root, "moved", "run", &["--steps", "4", "--resume"]));
}
