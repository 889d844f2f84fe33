//! `flashforward bench schedules` and `simulate --trace` on the command line: sizes in pixels like
//! `generate`, no required `--random-weights`, per-row slowest worker and K/V per device, and trace
//! folders created on demand.

use std::path::PathBuf;
use std::process::{Command, Output};

fn flashforward(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_flashforward")).args(args).output().unwrap()
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ff-bench-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

const SMALL: [&str; 10] = ["--config", "tiny", "--latents", "6", "--stages", "2", "--anchor-stride", "3", "--history", "1"];

#[test]
fn bench_takes_pixels_and_reports_slowest_worker_and_memory_per_device() {
    let trace = scratch("trace").join("new/folder");
    let mut args = vec!["bench", "schedules"];
    args.extend(SMALL);
    args.extend([
        "--height",
        "16",
        "--width",
        "32",
        "--schedules",
        "flashforward",
        "--executors",
        "serial,wavefront,wavefront-cp",
        "--json",
    ]);
    args.extend(["--trace", trace.to_str().unwrap()]);
    let out = flashforward(&args);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rows: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(rows.len(), 3);
    // FlashForward-CP: the planner sharded over the 2 stage workers, compared with the wavefront
    assert_eq!((rows[2]["executor"].as_str(), rows[2]["workers"].as_u64()), (Some("wavefront-cp"), Some(2)), "{rows:?}");
    assert!(rows[2]["ratio_to_flashforward"].as_f64().is_some(), "{rows:?}");
    for row in &rows {
        let (wall, busy) = (row["wall_seconds"].as_f64().unwrap(), row["slowest_worker_busy_seconds"].as_f64().unwrap());
        assert!(busy > 0.0 && busy <= wall, "{row}");
        let per_device = row["kv_bytes_per_device"].as_array().unwrap();
        assert_eq!(per_device.len(), 1, "one CPU device: {row}");
        // every worker shares the one device: its sum bounds the worst worker from above
        assert!(per_device[0].as_u64().unwrap() >= row["worst_worker_kv_bytes"].as_u64().unwrap(), "{row}");
    }
    // the serial row holds every bank on one worker; the wavefront splits them over 2 stages
    assert!(rows[1]["worst_worker_kv_bytes"].as_u64() < rows[0]["worst_worker_kv_bytes"].as_u64(), "{rows:?}");
    let svg = std::fs::read_to_string(trace.join("flashforward-wavefront.svg")).unwrap();
    assert!(svg.contains("on the wavefront executor"));

    // pixels, as for generate: 24 px is 3 latents, not a whole number of 2×2 patches
    let mut bad = vec!["bench", "schedules"];
    bad.extend(SMALL);
    bad.extend(["--height", "24"]);
    let out = flashforward(&bad);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("--height 24 must be a positive multiple of 16 pixels"), "{err}");
}

#[test]
fn bench_table_says_what_its_memory_columns_are() {
    let mut args = vec!["bench", "schedules"];
    args.extend(SMALL);
    args.extend(["--height", "16", "--width", "16", "--schedules", "flashforward", "--executors", "serial", "--warmup", "0"]);
    let out = flashforward(&args);
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(table.contains("16×16 px (latent 2×2)"), "{table}");
    assert!(table.contains("| slowest worker busy s | worst worker K/V KiB | K/V per device KiB |"), "{table}");
    assert!(table.contains("worst worker K/V: the largest peak of live K/V bytes of one worker"), "{table}");
}

#[test]
fn simulate_creates_the_trace_folder() {
    let dir = scratch("simulate").join("a/b");
    let path = dir.join("ff.json");
    let out = flashforward(&[
        "simulate",
        "--schedule",
        "flashforward",
        "--latents",
        "21",
        "--forward-seconds",
        "0.5",
        "--trace",
        path.to_str().unwrap(),
        "--json",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(path.is_file() && dir.join("ff.svg").is_file());
    std::fs::remove_dir_all(dir.parent().unwrap().parent().unwrap()).unwrap();
}

#[test]
fn bench_runs_guided_planner_steps() {
    let mut args = vec!["bench", "schedules"];
    args.extend(SMALL);
    args.extend(["--planner-steps", "3", "--planner-guidance", "4", "--height", "16", "--width", "16"]);
    args.extend(["--schedules", "flashforward", "--executors", "serial,batched", "--warmup", "0", "--json"]);
    let out = flashforward(&args);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rows: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(rows.len(), 2, "{rows:?}");
}
