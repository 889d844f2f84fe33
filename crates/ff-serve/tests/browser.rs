//! The page in a real browser: Debian's chromium, headless, driven through chromedriver's W3C
//! WebDriver endpoints (plain HTTP on 127.0.0.1, `ureq`). It loads the page with `autostart`,
//! waits for `#state` = `done`, checks `#frames` = 1 + 4(L − 1), and reads `#video`'s pixels
//! (canvas `getImageData`) for the prompted red. Skips, saying why, when chromium or chromedriver
//! is missing (`.ci/run` installs `chromium chromium-driver`). The screenshot of the page goes
//! to `$FF_SERVE_SCREENSHOT` when set (docs/serve.png was made so), else into the target's
//! temp folder.
//!
//! Nothing reaches the network: the server and chromedriver bind 127.0.0.1, and chromium runs
//! with a fresh profile and its background networking, updates, sync and QUIC off.

mod common;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use common::*;
use ff_serve::ServeConfig;
use serde_json::{Value, json};

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// chromedriver, killed when dropped.
struct Driver {
    child: Child,
    url: String,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn start_driver() -> Driver {
    let port = free_port();
    let child = Command::new(CHROMEDRIVER)
        .args([format!("--port={port}"), "--allowed-ips=127.0.0.1".into(), "--log-level=WARNING".into()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromedriver starts");
    let driver = Driver { child, url: format!("http://127.0.0.1:{port}") };
    let begin = Instant::now();
    while ureq::get(&format!("{}/status", driver.url)).call().is_err() {
        assert!(begin.elapsed() < Duration::from_secs(20), "chromedriver did not answer within 20 s");
        std::thread::sleep(Duration::from_millis(100));
    }
    driver
}

/// A WebDriver command's `value`.
fn call(method: &str, url: &str, body: Option<Value>) -> Value {
    let request = ureq::request(method, url).timeout(Duration::from_secs(60));
    let response = match body {
        Some(body) => request.send_json(body),
        None => request.call(),
    };
    match response {
        Ok(r) => {
            let mut answer: Value = r.into_json().expect("WebDriver answers JSON");
            answer["value"].take()
        }
        Err(ureq::Error::Status(code, r)) => panic!("{method} {url}: {code} {}", r.into_string().unwrap_or_default()),
        Err(e) => panic!("{method} {url}: {e}"),
    }
}

fn script(session: &str, body: &str) -> Value {
    call("POST", &format!("{session}/execute/sync"), Some(json!({ "script": body, "args": [] })))
}

fn text_of(session: &str, id: &str) -> String {
    script(session, &format!("return document.getElementById('{id}').textContent")).as_str().unwrap_or_default().to_string()
}

#[test]
fn the_page_plays_a_generated_video_in_chromium() {
    for tool in [CHROMIUM, CHROMEDRIVER] {
        if !Path::new(tool).exists() {
            println!("skipped: {tool} is missing (apt-get install chromium chromium-driver)");
            return;
        }
    }
    let (addr, app) = start(ServeConfig::default());
    let driver = start_driver();
    let profile = tempfile::tempdir().unwrap();
    let args = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--window-size=1000,860",
    ]
    .map(String::from)
    .into_iter()
    .chain([format!("--user-data-dir={}", profile.path().display())])
    .collect::<Vec<_>>();
    let capabilities = json!({ "capabilities": { "alwaysMatch": {
        "browserName": "chrome",
        "goog:chromeOptions": { "binary": CHROMIUM, "args": args },
    } } });
    let created = call("POST", &format!("{}/session", driver.url), Some(capabilities));
    let session = format!("{}/session/{}", driver.url, created["sessionId"].as_str().expect("a session id"));

    let page = format!("http://{addr}/?prompt=a%20red%20circle%20bounces&seconds=3&seed=1&autostart=1");
    call("POST", &format!("{session}/url"), Some(json!({ "url": page })));
    let begin = Instant::now();
    let state = loop {
        let state = text_of(&session, "state");
        if state == "done" || state == "error" || begin.elapsed() > Duration::from_secs(90) {
            break state;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let error = text_of(&session, "error");
    assert_eq!(state, "done", "the page's state (error text: {error:?})");
    let frames: usize = text_of(&session, "frames").parse().expect("#frames is a number");
    let latents = pipeline().plan(&flashforward::Request::new("a red circle bounces").seconds(3.0)).unwrap().length.latents;
    assert_eq!(frames, 1 + 4 * (latents - 1), "every frame shown");
    let ttff: f64 = text_of(&session, "ttff").parse().expect("#ttff is seconds");
    assert!(ttff > 0.0 && ttff < 60.0, "ttff {ttff}");
    let pixels = script(
        &session,
        "const c = document.getElementById('video');
         const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
         let red = 0;
         for (let i = 0; i < d.length; i += 4) if (d[i] > 150 && d[i + 1] < 90 && d[i + 2] < 90) red++;
         return [red, c.width * c.height];",
    );
    let (red, total) = (pixels[0].as_u64().unwrap(), pixels[1].as_u64().unwrap());
    assert!(red >= 4, "the red circle is on screen: {red} red pixels of {total}");
    for id in ["prompt", "start", "switch"] {
        assert_eq!(script(&session, &format!("return !!document.getElementById('{id}')")), json!(true), "#{id}");
    }

    let png = call("GET", &format!("{session}/screenshot"), None);
    let png = base64::engine::general_purpose::STANDARD.decode(png.as_str().expect("a base64 screenshot")).unwrap();
    let path = std::env::var_os("FF_SERVE_SCREENSHOT")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_TARGET_TMPDIR")).join("serve.png"));
    std::fs::write(&path, png).unwrap();
    println!("screenshot: {}; {frames} frames shown, TTFF {ttff} s, {red} red pixels", path.display());
    call("DELETE", &session, None);
    assert_eq!(app.status().finished, 1);
}
