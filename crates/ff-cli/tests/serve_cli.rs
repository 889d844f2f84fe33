//! `flashforward serve` as a user starts it: it loads the default model, binds 127.0.0.1 (port
//! 0: any free one), says where it serves, and answers the page and the status; `--host` with a
//! non-loopback address warns first.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

/// The server process, killed when dropped.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn serve_loads_the_default_model_and_answers_on_loopback() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_flashforward"))
        .args(["serve", "--port", "0", "--workers", "1", "--queue", "2"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = BufReader::new(child.stderr.take().unwrap());
    let server = Server(child);
    let mut said = Vec::new();
    let url = stderr
        .lines()
        .map_while(Result::ok)
        .inspect(|line| said.push(line.clone()))
        .find_map(|line| line.split_once("serving on ").map(|(_, rest)| rest.split_whitespace().next().unwrap().to_string()))
        .unwrap_or_else(|| panic!("no address printed: {said:?}"));
    assert!(url.starts_with("http://127.0.0.1:"), "binds loopback by default: {url}");
    assert!(!said.iter().any(|l| l.contains("warning")), "{said:?}");
    let page = ureq::get(&url).call().unwrap().into_string().unwrap();
    assert!(page.contains(r#"id="video""#) && page.contains(r#"id="switch""#), "the embedded page");
    let status: serde_json::Value = ureq::get(&format!("{url}api/status")).call().unwrap().into_json().unwrap();
    assert_eq!((status["workers"].as_u64(), status["queue"].as_u64(), status["running"].as_u64()), (Some(1), Some(2), Some(0)));
    drop(server);
}

#[test]
fn a_non_loopback_host_is_warned_about() {
    let output = Command::new(env!("CARGO_BIN_EXE_flashforward"))
        .args(["serve", "--host", "0.0.0.0", "--port", "0", "--model-dir", "/nonexistent/ff-serve-test"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "a missing model folder is an error: {stderr}");
    assert!(stderr.contains("warning: --host 0.0.0.0"), "{stderr}");
    assert!(stderr.contains("/nonexistent/ff-serve-test"), "the error names the folder: {stderr}");
}
