//! The messages of `/api/generate`'s WebSocket.
//!
//! Server to page: [`Event`]s as JSON text messages, each frame as one binary message (a PNG),
//! and the finished MP4 as one binary message announced by [`Event::Video`]. Binary messages
//! are frames in video order unless a `video` event came just before. Page to server:
//! [`Command`]s as JSON text.

use serde::{Deserialize, Serialize};

/// A server-to-page event (`{"type": "chunk", ...}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    /// Waiting for a worker; `position` 1 is next.
    Queued {
        /// Place in the queue.
        position: usize,
    },
    /// The generation started: what it will make, and its workers.
    Start {
        /// The text the model reads for the prompt.
        prompt: String,
        /// Video frames it will make: 1 + 4(L − 1).
        frames: usize,
        /// Latent frames L.
        latents: usize,
        /// Output chunks.
        chunks: usize,
        /// Frames per second.
        fps: u32,
        /// Frame width in pixels.
        width: usize,
        /// Frame height in pixels.
        height: usize,
        /// Worker names ("stage 0", ..., "planner"); a forward's `worker` indexes them.
        workers: Vec<String>,
        /// Rounding or rewording the planner noted.
        notes: Vec<String>,
    },
    /// A forward started (`done` false) or ended on a worker: the wavefront.
    Forward {
        /// The worker.
        worker: usize,
        /// The graph node.
        node: usize,
        /// Its label: `P(j,k)` planner, `A(j)` anchor cache, `R(i,k)` render chunk i at level k, ...
        label: String,
        /// The chunk or block it works on.
        unit: usize,
        /// Its input noise level (0: pure noise).
        level: usize,
        /// Seconds since the generation started.
        t: f64,
        /// Whether it ended.
        done: bool,
    },
    /// A decoded chunk; its `frames` frames follow as binary PNG messages.
    Chunk {
        /// Index in video order.
        index: usize,
        /// Output chunks.
        chunks: usize,
        /// Index of its first frame.
        first_frame: usize,
        /// Frames in it.
        frames: usize,
        /// The prompt it was made under, as the model read it (changes after a switch).
        prompt: String,
        /// Seconds since the generation started.
        t: f64,
    },
    /// A switch was accepted: from the first chunk no worker has started, the video shows
    /// `prompt` (as the model reads it); the chunk events say where it landed.
    Switching {
        /// The new prompt as the model reads it.
        prompt: String,
    },
    /// The generation ended (completely, or stopped early when `stopped` says why).
    Done {
        /// Frames made.
        frames: usize,
        /// Seconds to the first decoded frames (executor start to hand-over).
        ttff: Option<f64>,
        /// Seconds of the denoising path.
        denoise: f64,
        /// Seconds until the last frames.
        total: f64,
        /// DiT forwards run.
        forwards: usize,
        /// Why it stopped early.
        stopped: Option<String>,
    },
    /// The MP4 of the frames made follows as one binary message of `bytes` bytes.
    Video {
        /// Its size.
        bytes: usize,
    },
    /// A refused command or a failed generation.
    Error {
        /// What went wrong, as `generate` would say it.
        message: String,
    },
}

/// A page-to-server command (`{"type": "stop"}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Command {
    /// Stop at the next forward; the frames made so far stay, and their MP4 is sent.
    Stop,
    /// Change the prompt of the running generation from its next chunk boundary (checked as a
    /// request's prompt: an unknown word is answered with an error event and changes nothing).
    Switch {
        /// The new prompt.
        prompt: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_have_the_documented_json_shape() {
        let json = serde_json::to_value(Event::Queued { position: 2 }).unwrap();
        assert_eq!(json, serde_json::json!({ "type": "queued", "position": 2 }));
        let command: Command = serde_json::from_str(r#"{"type":"stop"}"#).unwrap();
        assert_eq!(command, Command::Stop);
        let command: Command = serde_json::from_str(r#"{"type":"switch","prompt":"a blue square"}"#).unwrap();
        assert_eq!(command, Command::Switch { prompt: "a blue square".into() });
        assert!(serde_json::from_str::<Command>(r#"{"type":"rm","path":"/"}"#).is_err());
    }
}
