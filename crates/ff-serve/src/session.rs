//! One page's generation over its WebSocket: wait in the [`Queue`](crate::queue::Queue)
//! (telling the page its position), then run the generation on a blocking thread and forward
//! what it sends, while reading the page's commands. A page that goes away (the socket closes or
//! errs) sets the stop flag, so the workers stop at their next forward; the queue place is freed
//! only when the generation has ended, so the next client gets a free worker, not a busy one.
//! A switch is checked here (`Pipeline::check_prompt`, the words of a request's prompt) and
//! handed to the running generation through its [`LiveSwitch`].

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::extract::ws::{Message, WebSocket};
use ff_model::AttentionBackend;
use flashforward::{LiveSwitch, Pipeline, Plan, Request};
use tokio::sync::mpsc;

use crate::app::App;
use crate::generation::{self, Out};
use crate::protocol::{Command, Event};
use crate::queue::Ticket;

/// Messages buffered between the generation and the socket (each at most one frame or event,
/// or the MP4).
const BUFFER: usize = 64;

/// A checked request and its plan.
#[derive(Debug, Clone)]
pub struct Job {
    /// The request.
    pub request: Request,
    /// Its plan on the server's pipeline.
    pub plan: Plan,
}

/// What the page said.
enum Heard {
    Command(Command),
    /// Not a command: answered with an error event.
    Bad(String),
    /// A ping, pong or reply to our close: nothing to do.
    Nothing,
    /// The page is gone.
    Gone,
}

fn heard(message: Option<Result<Message, axum::Error>>) -> Heard {
    match message {
        None | Some(Err(_)) | Some(Ok(Message::Close(_))) => Heard::Gone,
        Some(Ok(Message::Text(text))) => match serde_json::from_str(text.as_str()) {
            Ok(command) => Heard::Command(command),
            Err(e) => Heard::Bad(format!("not a command ({e}): {}", text.as_str())),
        },
        Some(Ok(Message::Binary(_))) => Heard::Bad("the server takes JSON text commands only".into()),
        Some(Ok(_)) => Heard::Nothing,
    }
}

async fn send(socket: &mut WebSocket, out: Out) -> Result<(), axum::Error> {
    let message = match out {
        Out::Event(event) => Message::Text(serde_json::to_string(&event).expect("events serialise").into()),
        Out::Frame(bytes) | Out::Video(bytes) => Message::Binary(bytes.into()),
    };
    socket.send(message).await
}

/// Runs `job` for the page on `socket` once `ticket` reaches a worker.
pub async fn run<B: AttentionBackend>(mut socket: WebSocket, app: App<B>, job: Job, mut ticket: Ticket)
where
    Pipeline<B>: Send + Sync + 'static,
{
    let mut changed = app.queue.subscribe();
    let mut told = 0;
    while let Err(position) = ticket.try_start() {
        if position != told {
            told = position;
            if send(&mut socket, Out::Event(Event::Queued { position })).await.is_err() {
                return;
            }
        }
        tokio::select! {
            _ = changed.changed() => {}
            message = socket.recv() => match heard(message) {
                Heard::Gone | Heard::Command(Command::Stop) => return,
                Heard::Command(Command::Switch { .. }) => {
                    let message = "a switch changes a running generation; this one is still queued".to_string();
                    let _ = send(&mut socket, Out::Event(Event::Error { message })).await;
                }
                Heard::Bad(message) => {
                    let _ = send(&mut socket, Out::Event(Event::Error { message })).await;
                }
                Heard::Nothing => {}
            }
        }
    }
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, mut rx) = mpsc::channel(BUFFER);
    let pipe = app.pipeline.clone();
    let stats = app.stats.clone();
    let live = LiveSwitch::new();
    let request = job.request.stop_flag(stop.clone()).live_switch(live.clone());
    let worker = tokio::task::spawn_blocking(move || {
        let _ticket = ticket;
        let outcome = generation::run(&pipe, request, &job.plan, &tx);
        stats.count(outcome);
    });
    let mut connected = true;
    loop {
        tokio::select! {
            out = rx.recv() => match out {
                None => break,
                Some(out) => if connected && send(&mut socket, out).await.is_err() {
                    connected = false;
                    stop.store(true, Ordering::SeqCst);
                }
            },
            message = socket.recv(), if connected => match heard(message) {
                Heard::Gone => {
                    tracing::info!("the page went away: stopping its generation");
                    connected = false;
                    stop.store(true, Ordering::SeqCst);
                }
                Heard::Command(Command::Stop) => stop.store(true, Ordering::SeqCst),
                Heard::Command(Command::Switch { prompt }) => {
                    let event = switch(&app.pipeline, &live, &prompt);
                    if send(&mut socket, Out::Event(event)).await.is_err() {
                        connected = false;
                        stop.store(true, Ordering::SeqCst);
                    }
                }
                Heard::Bad(message) => {
                    let _ = send(&mut socket, Out::Event(Event::Error { message })).await;
                }
                Heard::Nothing => {}
            }
        }
    }
    if let Err(e) = worker.await {
        tracing::error!(error = %e, "the generation thread panicked");
    }
    if connected {
        let _ = socket.send(Message::Close(None)).await;
    }
}

/// Hands `prompt` to the running generation when the model reads it, else says why not.
fn switch<B: AttentionBackend>(pipe: &Pipeline<B>, live: &LiveSwitch, prompt: &str) -> Event {
    match pipe.check_prompt(prompt.trim()) {
        Ok(read) => {
            tracing::info!(prompt = %read, "prompt switch");
            live.switch_to(prompt.trim());
            Event::Switching { prompt: read }
        }
        Err(e) => Event::Error { message: e.to_string() },
    }
}
