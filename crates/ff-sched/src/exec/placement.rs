//! [`Placement`]: which worker runs each node of a graph. Renderer-stage nodes of stage k go to
//! worker `k mod stage_workers`; planner nodes either share worker 0, ahead of rendering (node
//! order puts all planner nodes first: the paper's 4-device FlashForward), run on every stage
//! worker at once as one context-parallel forward (FlashForward-CP, also ahead of rendering), or
//! run on a dedicated planner worker (index `stage_workers`, streaming).

use crate::error::{Result, SchedError};
use crate::schedule::Node;

/// Where the planner runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlannerPlacement {
    /// On stage worker 0, ahead of rendering (node order puts all planner nodes first).
    Shared,
    /// On a dedicated worker (index `stage_workers`) concurrently with rendering.
    Dedicated,
    /// Every planner forward sharded by frames over all stage workers (context parallelism,
    /// FlashForward-CP), ahead of rendering; worker 0 leads.
    Sharded,
}

/// Assignment of graph nodes to workers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement {
    /// Workers that run renderer stages (stage k on worker `k mod stage_workers`).
    pub stage_workers: usize,
    /// Where the planner nodes run.
    pub planner: PlannerPlacement,
}

impl Placement {
    /// Everything on one worker.
    pub fn serial() -> Self {
        Self { stage_workers: 1, planner: PlannerPlacement::Shared }
    }

    /// One worker per stage (`workers` of them), planner on worker 0 first.
    pub fn wavefront(workers: usize) -> Self {
        Self { stage_workers: workers, planner: PlannerPlacement::Shared }
    }

    /// Stage workers plus a dedicated planner worker.
    pub fn streaming(workers: usize) -> Self {
        Self { stage_workers: workers, planner: PlannerPlacement::Dedicated }
    }

    /// Stage workers that also run every planner forward together, context-parallel.
    pub fn context_parallel(workers: usize) -> Self {
        Self { stage_workers: workers, planner: PlannerPlacement::Sharded }
    }

    /// Fails with [`SchedError::Config`] when there is no stage worker.
    pub fn validate(&self) -> Result<()> {
        if self.stage_workers == 0 {
            return Err(SchedError::Config("a placement needs at least one stage worker".into()));
        }
        Ok(())
    }

    /// Total workers.
    pub fn workers(&self) -> usize {
        self.stage_workers + usize::from(self.planner == PlannerPlacement::Dedicated)
    }

    /// Display names of the workers: "stage k" (or "stages k, k+N, …" with fewer workers than
    /// stages) and "planner".
    pub fn names(&self, stages: usize) -> Vec<String> {
        let mut names: Vec<String> = (0..self.stage_workers)
            .map(|w| {
                let own: Vec<String> = (w..stages).step_by(self.stage_workers).map(|k| k.to_string()).collect();
                match own.len() {
                    0 => format!("worker {w} (idle)"),
                    1 => format!("stage {}", own[0]),
                    _ => format!("stages {}", own.join(", ")),
                }
            })
            .collect();
        if self.planner == PlannerPlacement::Dedicated {
            names.push("planner".into());
        }
        names
    }

    /// The worker that runs `node` (a sharded planner forward: its lead, worker 0).
    pub fn worker_of(&self, node: &Node) -> usize {
        match (node.kind.is_planner(), self.planner) {
            (true, PlannerPlacement::Shared | PlannerPlacement::Sharded) => 0,
            (true, PlannerPlacement::Dedicated) => self.stage_workers,
            (false, _) => node.stage % self.stage_workers,
        }
    }

    /// Every worker that computes part of `node`: all stage workers for a sharded planner
    /// forward, else the one [`Placement::worker_of`].
    pub fn workers_of(&self, node: &Node) -> std::ops::Range<usize> {
        match (node.kind.is_planner(), self.planner) {
            (true, PlannerPlacement::Sharded) => 0..self.stage_workers,
            _ => {
                let w = self.worker_of(node);
                w..w + 1
            }
        }
    }
}
