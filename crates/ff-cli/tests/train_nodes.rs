//! `flashforward train sft` data parallel across processes on one machine (burn-collective over
//! 127.0.0.1): two nodes of one device train the same bytes as one process with two devices and
//! as one device accumulating two micro-batches; a killed node makes the other stop with an
//! error (its connection drops), a frozen one makes it stop when the collective timeout ends, and
//! restarting both with `--resume` continues from the last checkpoint.

use std::fs;
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::{Scratch, setup_sft, sft_args};

fn command(root: &Path, out: &str, extra: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_flashforward"));
    command.args(sft_args(root, "model", out, extra)).env_remove("RUST_LOG").stdout(Stdio::piped()).stderr(Stdio::piped());
    command
}

/// A port with the two above it free on 127.0.0.1 (coordinator, data services of nodes 0 and 1).
fn free_ports() -> u16 {
    loop {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        if port < 60000 && (1..3).all(|k| TcpListener::bind(("127.0.0.1", port + k)).is_ok()) {
            return port;
        }
    }
}

/// Node `rank` of 2 on `port`, one CPU device.
fn node(root: &Path, out: &str, rank: usize, port: u16, extra: &[&str]) -> Child {
    let coordinator = format!("127.0.0.1:{port}");
    let rank = rank.to_string();
    let mut args = vec!["--devices", "cpu", "--nodes", "2", "--node-rank", &rank, "--coordinator", &coordinator];
    args.extend(extra);
    command(root, out, &args).spawn().unwrap()
}

/// Waits for `child` at most `limit`; kills it and fails when it takes longer.
fn wait(mut child: Child, limit: Duration, what: &str) -> Output {
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > limit {
            child.kill().unwrap();
            let output = child.wait_with_output().unwrap();
            panic!("{what} still running after {limit:?}: {}", String::from_utf8_lossy(&output.stderr));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let output = child.wait_with_output().unwrap();
    eprintln!("{what}: {}", String::from_utf8_lossy(&output.stderr));
    output
}

/// Nodes 0 and 1 of a long run into `root/run` with a collective timeout of 5 s, once the run
/// has its first checkpoint.
fn training_past_a_checkpoint(root: &Path) -> (Child, Child) {
    let (port, timeout) = (free_ports(), ["--steps", "1000", "--collective-timeout", "5"]);
    let nodes = (node(root, "run", 0, port, &timeout), node(root, "run", 1, port, &timeout));
    let start = Instant::now();
    while !root.join("run/step-000002").is_dir() {
        assert!(start.elapsed() < Duration::from_secs(120), "no checkpoint after 120 s");
        std::thread::sleep(Duration::from_millis(20));
    }
    nodes
}

fn succeeded(output: &Output, what: &str) {
    assert!(output.status.success(), "{what} failed: {}", String::from_utf8_lossy(&output.stderr));
}

fn checkpoint_files(run: &Path, step: usize) -> Vec<Vec<u8>> {
    let dir = run.join(format!("step-{step:06}"));
    ["model.safetensors", "ema.safetensors", "optimizer.safetensors"].iter().map(|f| fs::read(dir.join(f)).unwrap()).collect()
}

fn losses(run: &Path) -> Vec<f64> {
    let text = fs::read_to_string(run.join("metrics.jsonl")).unwrap();
    text.lines().map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["loss"].as_f64().unwrap()).collect()
}

#[test]
fn two_nodes_train_the_bytes_of_two_devices_and_of_accumulation() {
    let scratch = Scratch::new("nodes");
    let root = &scratch.0;
    setup_sft(root);
    // batch 2, micro_batch 1: two devices, or one device accumulating two micro-batches.
    let steps = ["--steps", "3"];
    let devices = command(root, "devices", &[&steps[..], &["--devices", "cpu:0,1"]].concat()).spawn().unwrap();
    succeeded(&wait(devices, Duration::from_secs(120), "cpu:0,1"), "cpu:0,1");
    let accumulated = command(root, "accumulated", &[&steps[..], &["--devices", "cpu"]].concat()).spawn().unwrap();
    succeeded(&wait(accumulated, Duration::from_secs(120), "accumulation"), "accumulation");

    let port = free_ports();
    let (zero, one) = (node(root, "nodes", 0, port, &steps), node(root, "nodes", 1, port, &steps));
    let (zero, one) = (wait(zero, Duration::from_secs(120), "node 0"), wait(one, Duration::from_secs(120), "node 1"));
    succeeded(&zero, "node 0");
    succeeded(&one, "node 1");
    let printed = |o: &Output| String::from_utf8_lossy(&o.stdout).lines().any(|l| l.ends_with("step-000003"));
    assert!(printed(&zero) && !printed(&one), "node 0 reports the checkpoint it wrote, node 1 none");

    let (devices, accumulated, nodes) = (root.join("devices"), root.join("accumulated"), root.join("nodes"));
    for step in [2, 3] {
        assert!(checkpoint_files(&nodes, step) == checkpoint_files(&devices, step), "2 nodes vs 2 devices, step {step}");
        assert!(checkpoint_files(&devices, step) == checkpoint_files(&accumulated, step), "2 devices vs accumulation, step {step}");
    }
    assert_eq!(losses(&nodes), losses(&devices));
    assert_eq!(losses(&devices), losses(&accumulated));
}

#[test]
fn a_killed_node_stops_the_other_within_the_timeout_and_resume_continues() {
    let scratch = Scratch::new("nodes-fault");
    let root = &scratch.0;
    setup_sft(root);
    let run = root.join("run");
    let (zero, mut one) = training_past_a_checkpoint(root);
    one.kill().unwrap();
    one.wait().unwrap();
    let killed = Instant::now();
    let zero = wait(zero, Duration::from_secs(60), "node 0 after the kill");
    let stopped = killed.elapsed();
    assert!(!zero.status.success(), "node 0 must fail when node 1 is gone");
    let log = String::from_utf8_lossy(&zero.stderr);
    assert!(log.contains("data parallel") && log.contains("node 0 of 2"), "{log}");
    assert!(stopped < Duration::from_secs(30), "node 0 stopped {stopped:?} after the kill (timeout 5 s)");

    let last =
        fs::read_dir(&run).unwrap().filter_map(|e| e.unwrap().file_name().to_str()?.strip_prefix("step-")?.parse::<usize>().ok()).max();
    let last = last.unwrap();
    let target = (last + 2).to_string();
    let resume = ["--steps", &target, "--resume", "--collective-timeout", "30"];
    let port = free_ports();
    let (zero, one) = (node(root, "run", 0, port, &resume), node(root, "run", 1, port, &resume));
    let (zero, one) = (wait(zero, Duration::from_secs(120), "resumed node 0"), wait(one, Duration::from_secs(120), "resumed node 1"));
    succeeded(&zero, "resumed node 0");
    succeeded(&one, "resumed node 1");
    let log = String::from_utf8_lossy(&zero.stderr);
    assert!(log.contains("resumed from") && log.contains(&format!("step-{last:06}")), "{log}");
    assert!(run.join(format!("step-{:06}", last + 2)).is_dir());
}

#[test]
fn a_frozen_node_stops_the_other_when_the_timeout_ends() {
    let scratch = Scratch::new("nodes-frozen");
    let root = &scratch.0;
    setup_sft(root);
    let (zero, mut one) = training_past_a_checkpoint(root);
    // SIGSTOP: node 1 keeps its connections open but never answers.
    assert!(Command::new("kill").args(["-STOP", &one.id().to_string()]).status().unwrap().success());
    let frozen = Instant::now();
    let zero = wait(zero, Duration::from_secs(60), "node 0 beside a frozen node");
    let stopped = frozen.elapsed();
    one.kill().unwrap();
    one.wait().unwrap();
    assert!(!zero.status.success(), "node 0 must fail beside a frozen node");
    let log = String::from_utf8_lossy(&zero.stderr);
    assert!(log.contains("no answer from the other peers within 5s on node 0 of 2"), "{log}");
    assert!(
        stopped >= Duration::from_secs(4) && stopped < Duration::from_secs(30),
        "node 0 stopped {stopped:?} after the freeze (timeout 5 s)"
    );
}
