//! `flashforward train dmd` end to end on the CPU with tiny models: a Phase 1 run (`train sft`,
//! one step) → `train dmd` (two generator steps, each with one critic step) → the run's
//! checkpoint, which `generate --dit RUN` loads, and its export `RUN/transformer/`, which draws
//! the same frames. The teacher's files are never written. Then Phase 2 continues from the export
//! (its roles split back into adapters, a fresh critic warmed up first), and `train combine`
//! gives the export the Phase 1 run's planner, sampled by guided Euler steps.
//! Latents are 2×2 (16×16 px): one token per frame.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

mod common;

use common::{Scratch, diffusers_dir, write, write_clips};

const DMD_TOML: &str = "[train]\nbatch = 1\nlr = 1e-3\nepsilon = 1e-6\ncheckpoint_every = 2\n\
[dmd]\nlatents = 8\nstages = 2\nanchor_stride = 4\nplanner_block = 2\nchunk = 2\nhistory = 2\nplanner_context = 4\n\
score_window = 6\ncritic_updates = 1\ncritic_lora_rank = 4\ncritic_lora_alpha = 4.0\n";

fn flashforward(args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_flashforward")).args(args).output().unwrap();
    eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    out
}

fn ok(args: &[&str]) -> String {
    let out = flashforward(args);
    assert!(out.status.success(), "flashforward {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Every file under `dir` with its bytes.
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(snapshot(&path));
        } else {
            out.push((path.clone(), fs::read(&path).unwrap()));
        }
    }
    out.sort();
    out
}

#[test]
fn phase1_run_to_dmd_run_that_generate_loads() {
    let scratch = Scratch::new("dmd");
    let root = &scratch.0;
    let (model, teacher, data) = (root.join("model"), root.join("teacher"), root.join("data"));
    diffusers_dir(&model);
    diffusers_dir(&teacher);
    write_clips(&data, 2, [16, 8, 2, 2], [16, 16]);
    let path = |p: &Path| p.to_str().unwrap().to_string();
    let (sft_toml, dmd_toml) = (root.join("sft.toml"), root.join("dmd.toml"));
    write(
        &sft_toml,
        "[train]\nbatch = 1\nlr = 1e-3\nwarmup_steps = 0\nlora_rank = 4\nlora_alpha = 4.0\n[sft]\nlatents = 8\nanchor_stride = 4\nplanner_block = 2\nchunk = 2\nhistory = 2\nrebased_crops = 0\n",
    );
    write(&dmd_toml, DMD_TOML);
    let (phase1, phase2) = (root.join("phase1"), root.join("phase2"));
    ok(&[
        "train",
        "sft",
        "--model-dir",
        &path(&model),
        "--data",
        &path(&data),
        "--out",
        &path(&phase1),
        "--steps",
        "1",
        "--seed",
        "1",
        "--config",
        &path(&sft_toml),
    ]);

    // `train dmd` of the student `dit` into `out`.
    let dmd_args = |dit: &Path, out: &Path, steps: &str, seed: &str, config: &Path| {
        let (model, teacher, data) = (path(&model), path(&teacher), path(&data));
        let (dit, out, config) = (path(dit), path(out), path(config));
        [
            "train",
            "dmd",
            "--model-dir",
            &model,
            "--dit",
            &dit,
            "--teacher",
            &teacher,
            "--data",
            &data,
            "--out",
            &out,
            "--steps",
            steps,
            "--seed",
            seed,
            "--config",
            &config,
        ]
        .map(String::from)
    };
    let dmd = |dit: &Path, out: &Path, steps: &str, seed: &str, config: &Path| {
        let args = dmd_args(dit, out, steps, seed, config);
        ok(&args.iter().map(String::as_str).collect::<Vec<_>>())
    };
    let before = snapshot(&teacher);
    let log = dmd(&phase1, &phase2, "2", "3", &dmd_toml);
    assert!(log.contains("effective config:") && log.contains("[dmd]") && log.contains("lora_rank = 4"), "{log}");
    assert!(before == snapshot(&teacher), "the teacher's files changed");

    let records: Vec<serde_json::Value> =
        fs::read_to_string(phase2.join("metrics.jsonl")).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(records.iter().map(|r| r["step"].as_u64().unwrap()).collect::<Vec<_>>(), vec![1, 2]);
    for r in &records {
        for key in ["generator_loss", "critic_loss"] {
            assert!(r[key].as_f64().is_some_and(|x| x.is_finite() && x > 0.0), "{key} in {r}");
        }
    }
    let checkpoint = phase2.join("step-000002");
    for file in ["ema.safetensors", "state.json", "dmd.json", "critic/model.safetensors", "critic/state.json"] {
        assert!(checkpoint.join(file).is_file(), "{file} missing");
    }

    // generate renders with the distilled student.
    let video = root.join("video/");
    ok(&[
        "generate",
        "--model-dir",
        &path(&model),
        "--dit",
        &path(&phase2),
        "--prompt",
        "a red fox",
        "--latents",
        "1",
        "--height",
        "16",
        "--width",
        "16",
        "--seed",
        "1",
        "--out",
        &path(&video),
    ]);
    assert!(fs::read_dir(&video).unwrap().count() > 0, "no frames written");

    // The run exported its student as merged roles with its manifest; generate reads the export
    // at the manifest's defaults (2 stages, 16×16 px, here the same graph as `--stages 2` over
    // one latent) and draws the frames the run's roles draw.
    let export = phase2.join("transformer");
    for file in ["config.json", "planner/diffusion_pytorch_model.safetensors", "renderer/diffusion_pytorch_model.safetensors"] {
        assert!(export.join(file).is_file(), "{file} missing from the export");
    }
    let manifest: serde_json::Value = serde_json::from_str(&fs::read_to_string(export.join("flashforward.json")).unwrap()).unwrap();
    assert_eq!((manifest["contract"]["stages"].as_u64(), manifest["contract"]["planner_context"].as_u64()), (Some(2), Some(4)));
    assert_eq!((manifest["frame_size"].clone(), manifest["vocabulary"].as_str()), (serde_json::json!([16, 16]), Some("open")));
    let frames = |dit: &Path, extra: &[&str], out: &str| {
        let out = root.join(out);
        let dit_config = dit.join("config.json");
        let dit_config = if dit_config.is_file() { dit_config } else { model.join("transformer/config.json") };
        let mut args = vec!["generate", "--model-dir", model.to_str().unwrap(), "--dit", dit.to_str().unwrap()];
        args.extend(["--dit-config", dit_config.to_str().unwrap(), "--prompt", "a red fox", "--latents", "1", "--seed", "1"]);
        args.extend(extra);
        args.extend(["--out", out.to_str().unwrap()]);
        let log = ok(&args);
        let mut names: Vec<PathBuf> = fs::read_dir(&out).unwrap().map(|e| e.unwrap().path()).collect();
        names.sort();
        (log, names.iter().map(|p| fs::read(p).unwrap()).collect::<Vec<_>>())
    };
    let (log, exported) = frames(&export, &[], "exported/");
    assert!(log.contains("16x16 px") && log.contains("S = 2"), "the manifest's defaults: {log}");
    let (_, from_run) = frames(&phase2, &["--stages", "2", "--height", "16", "--width", "16"], "from-run/");
    assert!(!exported.is_empty() && exported == from_run, "the export draws the run's frames");

    // Phase 2 continued from the export: its rank-4 roles split back at rank 8 (they differ by
    // rank ≤ 8), a fresh critic fitted by 2 warm-up updates before the first generator update.
    let continue_toml = root.join("continue.toml");
    write(&continue_toml, DMD_TOML.replace("[dmd]\n", "lora_rank = 8\nlora_alpha = 8.0\n[dmd]\ncritic_warmup = 2\n"));
    let phase3 = root.join("phase3");
    let log = dmd(&export, &phase3, "1", "4", &continue_toml);
    assert!(log.contains("lora_rank = 8") && log.contains("critic_warmup = 2"), "{log}");
    let state = |dir: PathBuf| -> serde_json::Value { serde_json::from_str(&fs::read_to_string(dir.join("state.json")).unwrap()).unwrap() };
    let checkpoint = phase3.join("step-000001");
    assert_eq!(state(checkpoint.clone())["step"], 1);
    assert_eq!(state(checkpoint.join("critic"))["step"], 3, "2 warm-up and 1 critic update");
    assert!(phase3.join("transformer/flashforward.json").is_file(), "the continuation exports its student");

    // `train combine`: the Phase 1 run's planner beside the export's renderer, sampled by 3 Euler
    // steps guided at 2; generate reads the sampler from the manifest and counts each guided
    // step twice (1 latent: one anchor block of 3 × 2 + 1 forwards, one chunk of 2 stages).
    let combined = root.join("combined");
    let args = ["train", "combine", "--planner", &path(&phase1), "--student", &path(&export), "--planner-steps", "3"];
    ok(&[&args[..], &["--planner-guidance", "2", "--out", &path(&combined)]].concat());
    let manifest: serde_json::Value = serde_json::from_str(&fs::read_to_string(combined.join("flashforward.json")).unwrap()).unwrap();
    assert_eq!((manifest["contract"]["planner_steps"].as_u64(), manifest["contract"]["planner_guidance"].as_f64()), (Some(3), Some(2.0)));
    assert_eq!(manifest["contract"]["stages"].as_u64(), Some(2), "the rest of the student's contract is kept");
    let weights = |dir: &Path, role: &str| fs::read(dir.join(role).join("diffusion_pytorch_model.safetensors")).unwrap();
    assert_eq!(weights(&combined, "renderer"), weights(&export, "renderer"));
    assert_ne!(weights(&combined, "planner"), weights(&export, "planner"), "Phase 1's planner, not Phase 2's");
    let (log, combined_frames) = frames(&combined, &[], "combined-frames/");
    assert!(log.contains("planner 3 Euler steps, guidance 2") && log.contains("9 forwards (1 cache-update)"), "{log}");
    assert!(!combined_frames.is_empty() && combined_frames != exported, "the planner's anchors reach the video");
    // `--stages`: the renderer sampled at more stages than it was distilled at; nothing else moves.
    let restaged = root.join("restaged");
    ok(&[&args[..], &["--stages", "3", "--out", &path(&restaged)]].concat());
    let restaged_manifest: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(restaged.join("flashforward.json")).unwrap()).unwrap();
    assert_eq!(restaged_manifest["contract"]["stages"].as_u64(), Some(3));
    let mut expected = manifest.clone();
    expected["contract"]["stages"] = 3.into();
    expected["contract"]["planner_guidance"] = 5.0.into();
    assert_eq!(restaged_manifest, expected, "only the stages (and the default guidance) differ");
    assert_eq!(weights(&restaged, "renderer"), weights(&combined, "renderer"));

    // Phase 2 of the renderer alone beside the combined student's frozen planner, sampled as the
    // manifest says: the export keeps that planner and trains the renderer.
    let frozen_toml = root.join("frozen.toml");
    write(&frozen_toml, DMD_TOML.replace("[dmd]\n", "[dmd]\nplanner_steps = 3\nplanner_guidance = 2.0\n"));
    let (phase4, combined_dir) = (root.join("phase4"), path(&combined));
    let frozen_args = dmd_args(&combined, &phase4, "1", "5", &frozen_toml);
    let frozen_args: Vec<&str> = frozen_args.iter().map(String::as_str).chain(["--planner", &combined_dir]).collect();
    let log = ok(&frozen_args);
    assert!(log.contains("planner_steps = 3") && log.contains("planner = "), "{log}");
    let renderer = phase4.join("transformer");
    assert_eq!(weights(&renderer, "planner"), weights(&combined, "planner"), "the frozen planner is the export's");
    assert_ne!(weights(&renderer, "renderer"), weights(&combined, "renderer"), "the renderer trained");
    let manifest: serde_json::Value = serde_json::from_str(&fs::read_to_string(renderer.join("flashforward.json")).unwrap()).unwrap();
    assert_eq!((manifest["contract"]["planner_steps"].as_u64(), manifest["contract"]["planner_guidance"].as_f64()), (Some(3), Some(2.0)));
    let mut without_steps = dmd_args(&combined, &root.join("phase5"), "1", "5", &dmd_toml).to_vec();
    without_steps.extend(["--planner".to_string(), combined_dir.clone()]);
    let err = flashforward(&without_steps.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(!err.status.success() && String::from_utf8_lossy(&err.stderr).contains("needs [dmd] planner_steps > 0"));
    let err = flashforward(&frozen_args[..frozen_args.len() - 2]);
    assert!(!err.status.success() && String::from_utf8_lossy(&err.stderr).contains("planner_steps = 3 samples a frozen planner"));

    let err = flashforward(&[&args[..6], &["--planner-steps", "0", "--out", &path(&root.join("c0"))]].concat());
    assert!(!err.status.success() && String::from_utf8_lossy(&err.stderr).contains("--planner-steps must be at least 1"));
    let err =
        flashforward(&["train", "combine", "--planner", &path(&phase1), "--student", &path(&model), "--planner-steps", "3", "--out", "x"]);
    assert!(!err.status.success() && String::from_utf8_lossy(&err.stderr).contains("not an exported student (no flashforward.json)"));
}
