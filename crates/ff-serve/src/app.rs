//! The server's state ([`App`]: the pipeline, the queue, the limits) and its routes:
//!
//! | route | what |
//! | --- | --- |
//! | `GET /` | the page ([`crate::page`]) |
//! | `GET /api/status` | generations running and waiting, and how many finished, stopped, failed |
//! | `GET /api/check?prompt=&seconds=&seed=` | the request checked as `/api/generate` would: 200 with what it will make, 400 with the reason, 503 when busy |
//! | `GET /api/generate?prompt=&seconds=&seed=` | a WebSocket of one generation ([`crate::protocol`]); refused before the upgrade with 400 or 503 |

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Router;
use axum::extract::ws::WebSocketUpgrade;
use axum::extract::{DefaultBodyLimit, Query, State};
use axum::response::{Html, IntoResponse, Json, Response};
use axum::routing::get;
use ff_model::AttentionBackend;
use flashforward::{Pipeline, Request};
use serde::{Deserialize, Serialize};

use crate::error::{Result, ServeError};
use crate::generation::Outcome;
use crate::queue::{Load, Queue};
use crate::session::{self, Job};

/// The server's limits.
#[derive(Debug, Clone, PartialEq)]
pub struct ServeConfig {
    /// Generations that run at once.
    pub workers: usize,
    /// Generations that may wait for a worker; more are refused with 503.
    pub queue: usize,
    /// The longest video a page may ask for, in seconds.
    pub max_seconds: f64,
    /// The longest prompt, in characters.
    pub max_prompt: usize,
    /// The largest request body or WebSocket message the server reads, in bytes.
    pub max_body: usize,
}

impl Default for ServeConfig {
    /// One generation at a time (a CPU's cores serve one well), four waiting, videos up to 60 s.
    fn default() -> Self {
        Self { workers: 1, queue: 4, max_seconds: 60.0, max_prompt: 500, max_body: 4096 }
    }
}

/// How generations ended, since the server started.
#[derive(Debug, Default)]
pub struct Stats {
    finished: AtomicUsize,
    stopped: AtomicUsize,
    failed: AtomicUsize,
}

impl Stats {
    pub(crate) fn count(&self, outcome: Outcome) {
        let counter = match outcome {
            Outcome::Finished => &self.finished,
            Outcome::Stopped => &self.stopped,
            Outcome::Failed => &self.failed,
        };
        counter.fetch_add(1, Ordering::SeqCst);
    }
}

/// `GET /api/status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Status {
    /// Generations running.
    pub running: usize,
    /// Generations waiting.
    pub waiting: usize,
    /// Generations that may run at once.
    pub workers: usize,
    /// Places in the queue.
    pub queue: usize,
    /// Generations that made every frame.
    pub finished: usize,
    /// Generations stopped early (by the page, or because it went away).
    pub stopped: usize,
    /// Generations the library failed.
    pub failed: usize,
}

/// The server's state: a pipeline loaded once at start (clients name no paths), the queue and
/// the limits.
pub struct App<B: AttentionBackend> {
    pub(crate) pipeline: Arc<Pipeline<B>>,
    pub(crate) queue: Arc<Queue>,
    pub(crate) stats: Arc<Stats>,
    config: Arc<ServeConfig>,
}

impl<B: AttentionBackend> Clone for App<B> {
    fn clone(&self) -> Self {
        Self { pipeline: self.pipeline.clone(), queue: self.queue.clone(), stats: self.stats.clone(), config: self.config.clone() }
    }
}

/// The query of `/api/check` and `/api/generate`.
#[derive(Debug, Clone, Deserialize)]
pub struct Params {
    /// What to show.
    pub prompt: String,
    /// Length in seconds (default 5).
    pub seconds: Option<f64>,
    /// Noise seed (default 0).
    pub seed: Option<u64>,
}

/// `GET /api/check`'s answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Checked {
    /// The text the model reads.
    pub prompt: String,
    /// Frames it will make.
    pub frames: usize,
    /// Latent frames.
    pub latents: usize,
    /// Rounding or rewording noted.
    pub notes: Vec<String>,
}

impl<B: AttentionBackend> App<B>
where
    Pipeline<B>: Send + Sync + 'static,
{
    /// A server of `pipeline` with `config`'s limits.
    pub fn new(pipeline: Arc<Pipeline<B>>, config: ServeConfig) -> Self {
        let queue = Queue::new(config.workers, config.queue);
        Self { pipeline, queue, stats: Arc::default(), config: Arc::new(config) }
    }

    /// The routes (see the module docs).
    pub fn router(self) -> Router {
        let limit = self.config.max_body;
        Router::new()
            .route("/", get(|| async { Html(crate::page::PAGE) }))
            .route("/api/status", get(status::<B>))
            .route("/api/check", get(check::<B>))
            .route("/api/generate", get(generate::<B>))
            .layer(DefaultBodyLimit::max(limit))
            .with_state(self)
    }

    /// Generations running and waiting, and how they ended.
    pub fn status(&self) -> Status {
        let Load { running, waiting, workers, queue } = self.queue.load();
        let count = |c: &AtomicUsize| c.load(Ordering::SeqCst);
        let stats = &self.stats;
        Status {
            running,
            waiting,
            workers,
            queue,
            finished: count(&stats.finished),
            stopped: count(&stats.stopped),
            failed: count(&stats.failed),
        }
    }

    /// `params` checked as `generate` checks a request: length, prompt words, tokens.
    pub fn job(&self, params: &Params) -> Result<Job> {
        let limits = &self.config;
        let seconds = params.seconds.unwrap_or(5.0);
        if !(seconds > 0.0 && seconds <= limits.max_seconds) {
            return Err(ServeError::Invalid(format!("seconds={seconds}: this server makes 0 < seconds <= {}", limits.max_seconds)));
        }
        let prompt = params.prompt.trim();
        if prompt.is_empty() || prompt.chars().count() > limits.max_prompt {
            return Err(ServeError::Invalid(format!("the prompt must have 1 to {} characters", limits.max_prompt)));
        }
        let request = Request::new(prompt).seconds(seconds).seed(params.seed.unwrap_or(0));
        let plan = self.pipeline.plan(&request)?;
        Ok(Job { request, plan })
    }
}

async fn status<B: AttentionBackend>(State(app): State<App<B>>) -> Json<Status>
where
    Pipeline<B>: Send + Sync + 'static,
{
    Json(app.status())
}

async fn check<B: AttentionBackend>(State(app): State<App<B>>, Query(params): Query<Params>) -> Result<Json<Checked>>
where
    Pipeline<B>: Send + Sync + 'static,
{
    let Job { plan, .. } = app.job(&params)?;
    app.queue.check()?;
    Ok(Json(Checked { prompt: plan.prompt, frames: plan.length.frames, latents: plan.length.latents, notes: plan.notes }))
}

async fn generate<B: AttentionBackend>(State(app): State<App<B>>, Query(params): Query<Params>, ws: WebSocketUpgrade) -> Response
where
    Pipeline<B>: Send + Sync + 'static,
{
    let job = match app.job(&params) {
        Ok(job) => job,
        Err(e) => return e.into_response(),
    };
    let ticket = match app.queue.join() {
        Ok(ticket) => ticket,
        Err(e) => return e.into_response(),
    };
    tracing::info!(prompt = %params.prompt, frames = job.plan.length.frames, "generation queued");
    let limit = app.config.max_body;
    ws.max_message_size(limit).max_frame_size(limit).on_upgrade(move |socket| session::run(socket, app, job, ticket))
}
