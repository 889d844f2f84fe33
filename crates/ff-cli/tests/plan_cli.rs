//! `flashforward plan` / `simulate` print the paper's forward counts and rounds.

use std::process::Command;

fn json(args: &[&str]) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_flashforward")).args(args).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn plan_counts_at_81_latents() {
    for (schedule, forwards, cache, rounds) in [("flashforward", 123, 3, 45), ("self-forcing", 134, 26, 134), ("hiar", 212, 104, 56)] {
        let v = json(&["plan", "--schedule", schedule, "--latents", "81", "--stages", "4", "--json"]);
        assert_eq!(v["schedule"], schedule);
        assert_eq!(v["forwards"], forwards, "{schedule}");
        assert_eq!(v["cache_update_forwards"], cache, "{schedule}");
        assert_eq!(v["rounds"], rounds, "{schedule}");
    }
    let v = json(&["plan", "--schedule", "flashforward", "--latents", "81", "--stages", "4", "--json"]);
    assert_eq!(v["planner_forwards"], 15);
    assert_eq!(v["renderer_forwards"], 108);
}

#[test]
fn simulate_streaming_planner() {
    let v = json(&[
        "simulate",
        "--schedule",
        "flashforward",
        "--latents",
        "81",
        "--stages",
        "4",
        "--devices",
        "4",
        "--forward-seconds",
        "0.5",
        "--planner-devices",
        "1",
        "--json",
    ]);
    assert_eq!(v["rounds"], 35.0);
    assert_eq!(v["seconds"], 17.5);
    assert_eq!(v["ttff_seconds"], 4.5);
}

#[test]
fn bad_flags_name_the_flag() {
    let out = Command::new(env!("CARGO_BIN_EXE_flashforward"))
        .args(["plan", "--schedule", "flashforward", "--latents", "0", "--json"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--latents"));
    let out = Command::new(env!("CARGO_BIN_EXE_flashforward")).args(["plan", "--schedule", "nope"]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("flashforward"));
}
