//! `flashforward serve`: a local web page that streams a FlashForward video as it is made.
//!
//! The server loads one model at start ([`App::new`] takes a loaded [`flashforward::Pipeline`];
//! clients name prompts, lengths and seeds, never paths) and serves one embedded page
//! ([`page`]) and a small API ([`app`]). A page asks for a generation; the request is checked
//! as `flashforward generate` checks it (an unknown prompt word gets the same error), takes a
//! place in a bounded [`queue`] (or is refused with 503), and once a worker is free runs on a
//! blocking thread ([`generation`]) while the session ([`session`]) streams to the page:
//!
//! ```text
//! page ──GET /api/generate?prompt=…&seconds=…&seed=… (WebSocket)──▶ queue ──▶ Pipeline::generate_with
//!      ◀── {"type":"queued"} {"type":"start"} {"type":"forward"}… {"type":"chunk"} PNG PNG … {"type":"done"} {"type":"video"} MP4
//!      ──▶ {"type":"stop"} {"type":"switch","prompt":"…"}  ◀── {"type":"switching"} (LiveSwitch)
//! ```
//!
//! **Transport: one WebSocket per generation.** The stream is two-way: frames, forward events
//! and chunk events go to the page while the page may say stop or switch the prompt; a WebSocket carries both on one
//! connection, with the protocol's own message framing (text messages are JSON events, binary
//! messages are PNG frames, so no length prefixes are written by hand), and its closing is the
//! disconnect signal that cancels the generation. HTTP streaming would need a second request
//! (and a way to tie it to the first) for the commands and a framing of our own inside the chunked body. Frames are PNG because the
//! browser decodes them natively (`createImageBitmap`), losslessly and off the main thread; the
//! MP4 for "save" is the library's writer, sent once at the end. The refusals (400 for a bad
//! request, 503 when the queue is full) are plain HTTP answers to the upgrade request, and
//! `/api/check` gives the page their text, which a browser hides for a failed upgrade.
//!
//! Bounds: at most `workers` generations run and `queue` wait; a video is at most
//! `max_seconds`; a prompt at most `max_prompt` characters; request bodies and WebSocket
//! messages at most `max_body` bytes; the channel from a generation to its socket is bounded
//! (a slow page slows its generation); a page that goes away stops its generation at the next
//! forward. So memory is bounded by `workers` generations of the longest video, whatever the
//! clients do.
#![warn(missing_docs)]

pub mod app;
pub mod error;
pub mod generation;
pub mod page;
pub mod protocol;
pub mod queue;
pub mod session;

use std::net::SocketAddr;

use ff_model::AttentionBackend;
use flashforward::Pipeline;

pub use app::{App, ServeConfig, Status};
pub use error::{Result, ServeError};

/// Serves `app` on `listener` until the process ends.
pub async fn serve<B: AttentionBackend>(listener: tokio::net::TcpListener, app: App<B>) -> Result<()>
where
    Pipeline<B>: Send + Sync + 'static,
{
    let addr = listener.local_addr().map(|a| a.to_string()).unwrap_or_default();
    axum::serve(listener, app.router()).await.map_err(|source| ServeError::Bind { addr, source })
}

/// Binds `addr`, tells `ready` the bound address, and serves `app` on a new runtime until the
/// process ends.
pub fn run<B: AttentionBackend>(addr: SocketAddr, app: App<B>, ready: impl FnOnce(SocketAddr)) -> Result<()>
where
    Pipeline<B>: Send + Sync + 'static,
{
    let bind = |source| ServeError::Bind { addr: addr.to_string(), source };
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().map_err(bind)?;
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(addr).await.map_err(bind)?;
        ready(listener.local_addr().map_err(bind)?);
        serve(listener, app).await
    })
}
