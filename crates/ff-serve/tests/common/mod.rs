//! What the server tests share: the default model loaded once per test binary, a server on an
//! ephemeral 127.0.0.1 port, and a WebSocket client that collects one generation.

#![allow(dead_code)] // each test binary uses a part

use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};

use ff_serve::protocol::Event;
use ff_serve::{App, ServeConfig};
use flashforward::{Cpu, Pipeline};
use futures_util::{SinkExt, StreamExt};
use tokio_tungstenite::tungstenite::{self, Message};

/// The default model, loaded once.
pub fn pipeline() -> Arc<Pipeline<Cpu>> {
    static PIPE: OnceLock<Arc<Pipeline<Cpu>>> = OnceLock::new();
    PIPE.get_or_init(|| {
        let dir = flashforward::default_model_dir().expect("the default model is in the checkout");
        Arc::new(Pipeline::load(dir, &Default::default()).expect("the default model loads"))
    })
    .clone()
}

/// A server with `config` on 127.0.0.1 (any free port), on a runtime of its own thread; the
/// returned app shares its state (for [`App::status`]).
pub fn start(config: ServeConfig) -> (SocketAddr, App<Cpu>) {
    let app = App::new(pipeline(), config);
    let (tx, rx) = std::sync::mpsc::channel();
    let served = app.clone();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            ff_serve::serve(listener, served).await.unwrap();
        });
    });
    (rx.recv().unwrap(), app)
}

/// `/api/generate`'s URL for `prompt`, `seconds`, `seed`.
pub fn generate_url(addr: SocketAddr, prompt: &str, seconds: f64, seed: u64) -> String {
    let prompt = prompt.replace(' ', "%20");
    format!("ws://{addr}/api/generate?prompt={prompt}&seconds={seconds}&seed={seed}")
}

/// A connected generation.
pub type Socket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Opens a generation; `Err(status)` when the server refused it with that HTTP status (and
/// the body's text).
pub async fn open(url: &str) -> Result<Socket, (u16, String)> {
    match tokio_tungstenite::connect_async(url).await {
        Ok((socket, _)) => Ok(socket),
        Err(tungstenite::Error::Http(response)) => {
            let body = response.body().as_deref().map(|b| String::from_utf8_lossy(b).into_owned()).unwrap_or_default();
            Err((response.status().as_u16(), body))
        }
        Err(e) => panic!("cannot connect to {url}: {e}"),
    }
}

/// The HTTP status and body of a refused generation (panics when it is accepted).
pub async fn refused(url: &str) -> (u16, String) {
    match open(url).await {
        Ok(_) => panic!("{url} was accepted"),
        Err(refusal) => refusal,
    }
}

/// Everything one generation sent.
#[derive(Debug, Default)]
pub struct Received {
    /// The events in order.
    pub events: Vec<Event>,
    /// The frames in order, decoded from their PNGs.
    pub frames: Vec<image::RgbImage>,
    /// The MP4.
    pub video: Option<Vec<u8>>,
}

impl Received {
    /// The start event's (frames, latents).
    pub fn planned(&self) -> (usize, usize) {
        self.events
            .iter()
            .find_map(|e| match e {
                Event::Start { frames, latents, .. } => Some((*frames, *latents)),
                _ => None,
            })
            .expect("a start event")
    }

    /// The done event's (frames, stopped).
    pub fn done(&self) -> Option<(usize, Option<String>)> {
        self.events.iter().find_map(|e| match e {
            Event::Done { frames, stopped, .. } => Some((*frames, stopped.clone())),
            _ => None,
        })
    }
}

/// Reads `socket` until the server closes it; `until` may end the reading early (returning true
/// after an event).
pub async fn receive(socket: &mut Socket, mut until: impl FnMut(&Received) -> bool) -> Received {
    let mut got = Received::default();
    let mut video_next = false;
    while let Some(message) = socket.next().await {
        match message.expect("a well-formed message") {
            Message::Text(text) => {
                let event: Event = serde_json::from_str(text.as_str()).expect("a documented event");
                video_next = matches!(event, Event::Video { .. });
                got.events.push(event);
                if until(&got) {
                    break;
                }
            }
            Message::Binary(bytes) if video_next => {
                video_next = false;
                got.video = Some(bytes.to_vec());
            }
            Message::Binary(bytes) => {
                got.frames.push(image::load_from_memory(&bytes).expect("a PNG frame").to_rgb8());
            }
            Message::Close(_) => break,
            _ => {}
        }
    }
    got
}

/// Sends a JSON command.
pub async fn command(socket: &mut Socket, json: serde_json::Value) {
    socket.send(Message::Text(json.to_string().into())).await.expect("the command is sent");
}

/// Pixels of `frame` that read as the small world's red.
pub fn red_pixels(frame: &image::RgbImage) -> usize {
    frame.pixels().filter(|p| p[0] > 150 && p[1] < 90 && p[2] < 90).count()
}

/// Pixels of `frame` that read as the small world's blue (45, 95, 240).
pub fn blue_pixels(frame: &image::RgbImage) -> usize {
    frame.pixels().filter(|p| p[2] > 170 && p[0] < 110 && p[1] < 150).count()
}

/// The prompt of every chunk event, in order.
pub fn chunk_prompts(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Chunk { prompt, .. } => Some(prompt.clone()),
            _ => None,
        })
        .collect()
}

/// Peak resident memory of this process (VmHWM), in MiB.
pub fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}
