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
        "--free-comm",
        "--json",
    ]);
    assert_eq!(v["rounds"], 35.0);
    assert_eq!(v["seconds"], 17.5);
    assert_eq!(v["ttff_seconds"], 4.5);
}

#[test]
fn simulate_counts_the_communication_of_a_context_parallel_planner() {
    let run = |extra: &[&str]| {
        let base = ["simulate", "--schedule", "flashforward", "--latents", "81", "--forward-seconds", "0.137", "--json"];
        json(&[&base[..], extra].concat())
    };
    let (shared, cp) = (run(&[]), run(&["--planner-cp"]));
    assert_eq!(cp["planner_cp"], true);
    // shared: only latents between stage devices and one role-weight swap; CP adds 15 forwards'
    // all-gathers and a swap on every device
    let (shared_bytes, cp_bytes) = (shared["comm_bytes"].as_f64().unwrap(), cp["comm_bytes"].as_f64().unwrap());
    assert!(shared_bytes > 0.0 && cp_bytes > 4.0 * shared_bytes, "{shared_bytes} {cp_bytes}");
    assert!(cp["comm_seconds"].as_f64().unwrap() > shared["comm_seconds"].as_f64().unwrap());
    // the 14B model across nodes moves more bytes, more slowly
    let far = run(&["--planner-cp", "--model", "14b", "--link-gbps", "400", "--link-latency-us", "20"]);
    assert!(far["comm_seconds"].as_f64().unwrap() > 10.0 * cp["comm_seconds"].as_f64().unwrap());
    let out = Command::new(env!("CARGO_BIN_EXE_flashforward"))
        .args(["simulate", "--schedule", "flashforward", "--forward-seconds", "1", "--link-gbps", "0"])
        .output()
        .unwrap();
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("link"));
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

#[test]
fn plan_writes_the_graph_as_json_and_dot() {
    let dir = std::env::temp_dir().join(format!("ff-plan-graph-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (json_path, dot_path) = (dir.join("g.json"), dir.join("g.dot"));
    let args = ["plan", "--schedule", "flashforward", "--latents", "21", "--anchor-window", "2", "--history", "3", "--json"];
    let paths = ["--graph", json_path.to_str().unwrap(), "--dot", dot_path.to_str().unwrap()];
    let v = json(&[&args[..], &paths[..]].concat());
    let graph: serde_json::Value = serde_json::from_slice(&std::fs::read(&json_path).unwrap()).unwrap();
    let nodes = graph["nodes"].as_array().unwrap();
    assert_eq!(nodes.len() as u64, v["forwards"].as_u64().unwrap());
    assert_eq!(graph["contract"]["config"]["anchor_window"], 2);
    // chunk 6 (18-20) at stage 1 reads Γ = {10, 20} and the stage-1 K/V of chunks 3, 4, 5
    let node = nodes.iter().find(|n| n["unit"] == serde_json::json!({ "chunk": 6 }) && n["level"] == 1).unwrap();
    let chunk = |c: usize| serde_json::json!({ "chunk": { "bank": 1, "chunk": c } });
    let want = serde_json::json!([{ "anchor": 1 }, { "anchor": 2 }, chunk(3), chunk(4), chunk(5)]);
    assert_eq!(node["reads"], want);
    let dot = std::fs::read_to_string(&dot_path).unwrap();
    assert!(dot.starts_with("digraph"));
    assert_eq!(dot.matches("[label=").count(), nodes.len());
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn no_history_and_no_anchors_remove_the_banks() {
    let v = json(&["plan", "--schedule", "flashforward", "--latents", "81", "--no-anchors", "--no-history", "--json"]);
    assert_eq!(v["planner_forwards"], 0);
    assert_eq!(v["forwards"], 27 * 4);
    let out = Command::new(env!("CARGO_BIN_EXE_flashforward"))
        .args(["plan", "--schedule", "flashforward", "--no-history", "--history", "2"])
        .output()
        .unwrap();
    assert!(!out.status.success(), "--no-history conflicts with --history");
}

#[test]
fn plan_counts_guided_planner_steps_twice() {
    let v = json(&["plan", "--schedule", "flashforward", "--latents", "81", "--planner-steps", "50", "--planner-guidance", "5", "--json"]);
    // 3 blocks × (50 steps × 2 + 1 cache forward), and the 108 renderer forwards
    assert_eq!((v["planner_blocks"].clone(), v["planner_forwards"].clone(), v["forwards"].clone()), (3.into(), 303.into(), 411.into()));
    assert_eq!(v["rounds"], 303 + 27 + 3);
    assert_eq!(v["planner_timesteps"].as_array().map(Vec::len), Some(50));
    assert_eq!(json(&["plan", "--schedule", "self-forcing", "--latents", "81", "--json"])["planner_blocks"], 0);
    let out = Command::new(env!("CARGO_BIN_EXE_flashforward"))
        .args(["plan", "--schedule", "flashforward", "--latents", "81", "--planner-guidance", "5"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("planner steps > 0") && err.contains("--planner-steps"), "{err}");
}

#[test]
fn a_graph_file_goes_back_into_plan_and_simulate() {
    let dir = std::env::temp_dir().join(format!("ff-plan-graph-file-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("graph.json");
    let written = json(&["plan", "--schedule", "flashforward", "--latents", "41", "--graph", file.to_str().unwrap(), "--json"]);
    let read = json(&["plan", "--schedule-file", file.to_str().unwrap(), "--json"]);
    for key in ["forwards", "cache_update_forwards", "rounds", "anchors", "latents"] {
        assert_eq!(read[key], written[key], "{key}");
    }
    let sim = json(&["simulate", "--schedule-file", file.to_str().unwrap(), "--forward-seconds", "1", "--json"]);
    assert_eq!(sim["forwards"], written["forwards"]);
    std::fs::write(&file, "{\"schedule\": 1}").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_flashforward")).args(["plan", "--schedule-file", file.to_str().unwrap()]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("graph.json") && err.contains("not a graph file"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}
