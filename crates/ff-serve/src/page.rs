//! The page: static HTML, CSS and JavaScript in one file, embedded in the binary (no build step).
//!
//! It reads `?prompt=&seconds=&seed=&autostart=1`, opens `/api/generate`'s WebSocket, decodes
//! each PNG frame as it arrives and plays them at the stream's FPS from a buffer, as a player
//! does: playback starts once a chunk is buffered or the generation ended, and waits (buffering)
//! when it catches up with the frames made. It shows TTFF (from the generation's start to the
//! first frame on screen), frames made against frames shown, the denoising seconds and FPS, the
//! wavefront (one row per worker, a box per forward, drawn as forwards start and end), and offers
//! the MP4 with "save". "switch" (or Enter while running) sends the prompt box's text as the
//! running generation's new prompt. Elements the outside checks use: `#video` (canvas), `#frames`, `#ttff`,
//! `#state` (`idle`, `running`, `done`, `error`), `#prompt`, `#start`, `#switch`.

/// The page's HTML.
pub const PAGE: &str = include_str!("../page/index.html");
