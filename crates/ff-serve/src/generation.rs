//! One generation on a blocking thread: runs [`Pipeline::generate_with`] and turns what it
//! reports into [`Out`] messages for the session: the start, each forward as it starts and ends
//! (the request's forward hook), each decoded chunk and its frames as PNGs, the end, and the MP4
//! of the frames made.
//!
//! Memory: the channel to the session is bounded, so a slow page slows the generation rather
//! than piling frames up; the frames kept for the MP4 are bounded by the server's longest video.
//! A closed channel (the page went away) ends the generation at the next chunk, and the stop flag
//! the session sets ends it at the next forward.

use std::io::Cursor;
use std::ops::ControlFlow;
use std::time::Instant;

use ff_model::AttentionBackend;
use flashforward::video::VideoSink;
use flashforward::{Executor, Forward, Frame, Pipeline, Plan, Report, Request};
use tokio::sync::mpsc::Sender;

use crate::error::{Result, ServeError};
use crate::protocol::Event;

/// A message for the page.
#[derive(Debug)]
pub enum Out {
    /// A JSON event.
    Event(Event),
    /// One frame, PNG.
    Frame(Vec<u8>),
    /// The MP4 of the frames made.
    Video(Vec<u8>),
}

/// Runs `request` (checked into `plan`) on `pipe`, sending everything to `out`; returns whether
/// it ran to the end, was stopped or failed.
pub fn run<B: AttentionBackend>(pipe: &Pipeline<B>, request: Request, plan: &Plan, out: &Sender<Out>) -> Outcome {
    let start = Instant::now();
    let send = |message: Out| out.blocking_send(message).is_ok();
    let hook = out.clone();
    let request = request.on_forward(move |f: Forward| {
        let _ = hook.blocking_send(Out::Event(forward_event(&f, start)));
    });
    send(Out::Event(start_event(plan)));
    let mut frames: Vec<Frame> = Vec::new();
    let result = pipe.generate_with(&request, |chunk| {
        let event = Event::Chunk {
            index: chunk.index,
            chunks: chunk.chunks,
            first_frame: chunk.first_frame,
            frames: chunk.frames.len(),
            prompt: chunk.prompt.to_string(),
            t: start.elapsed().as_secs_f64(),
        };
        let sent = send(Out::Event(event)) && chunk.frames.iter().all(|f| send(Out::Frame(png(f))));
        frames.extend_from_slice(chunk.frames);
        if sent { ControlFlow::Continue(()) } else { ControlFlow::Break(()) }
    });
    drop(request);
    let report = match result {
        Ok(report) => report,
        Err(e) => {
            tracing::warn!(error = %e, "generation failed");
            send(Out::Event(Event::Error { message: e.to_string() }));
            return Outcome::Failed;
        }
    };
    let outcome = if report.stopped.is_some() { Outcome::Stopped } else { Outcome::Finished };
    tracing::info!(frames = report.frames, stopped = ?report.stopped, "generation ended");
    if !send(Out::Event(done_event(&report))) || frames.is_empty() {
        return outcome;
    }
    match mp4(&frames) {
        Ok(bytes) => {
            if send(Out::Event(Event::Video { bytes: bytes.len() })) {
                send(Out::Video(bytes));
            }
        }
        Err(e) => {
            send(Out::Event(Event::Error { message: e.to_string() }));
        }
    }
    outcome
}

/// How a generation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Every frame made.
    Finished,
    /// Stopped early (by the page, or because it went away).
    Stopped,
    /// The library failed.
    Failed,
}

fn start_event(plan: &Plan) -> Event {
    let workers = match plan.executor {
        Executor::Batched => vec!["batched".to_string()],
        _ => plan.placement.names(plan.graph.contract.stages()),
    };
    Event::Start {
        prompt: plan.prompt.clone(),
        frames: plan.length.frames,
        latents: plan.length.latents,
        chunks: plan.graph.outputs().len(),
        fps: flashforward::FPS,
        width: plan.frame[1],
        height: plan.frame[0],
        workers,
        notes: plan.notes.clone(),
    }
}

fn forward_event(f: &Forward, start: Instant) -> Event {
    let unit = match f.node.unit {
        ff_sched::schedule::Unit::Block(j) | ff_sched::schedule::Unit::Chunk(j) => j,
        ff_sched::schedule::Unit::Clip => 0,
    };
    Event::Forward {
        worker: f.worker,
        node: f.node.id,
        label: ff_sched::trace::label(f.node),
        unit,
        level: f.node.level,
        t: f.at.saturating_duration_since(start).as_secs_f64(),
        done: f.done,
    }
}

fn done_event(report: &Report) -> Event {
    Event::Done {
        frames: report.frames,
        ttff: report.first_frames.map(|d| d.as_secs_f64()),
        denoise: report.denoise.as_secs_f64(),
        total: report.total.as_secs_f64(),
        forwards: report.forwards,
        stopped: report.stopped.clone(),
    }
}

/// A frame as PNG bytes.
fn png(frame: &Frame) -> Vec<u8> {
    let mut bytes = Vec::new();
    frame.write_to(&mut Cursor::new(&mut bytes), image::ImageFormat::Png).expect("an RGB frame encodes as PNG in memory");
    bytes
}

/// The frames as an H.264 MP4 (the library's writer, through a temp folder).
fn mp4(frames: &[Frame]) -> Result<Vec<u8>> {
    let dir = tempfile::tempdir().map_err(|e| ServeError::Video(e.to_string()))?;
    let mut sink = VideoSink::create(&dir.path().join("video.mp4"))?;
    sink.push_frames(frames)?;
    let path = sink.finish()?;
    std::fs::read(&path).map_err(|e| ServeError::Video(format!("{}: {e}", path.display())))
}
