//! Which devices the workers of a schedule run on. One device (the CPU: Flex, each worker on its
//! own bounded thread pool) runs every worker; several devices get one worker each. Workers map
//! to devices round-robin: worker `w` runs on device `w mod n`.
//!
//! | executor | workers |
//! | --- | --- |
//! | serial | 1 |
//! | wavefront | one per stage (S) on one device, else one per device |
//! | streaming | the wavefront's stage workers + a dedicated planner worker |
//! | batched | 1, running each dependency wave as one packed forward |
//!
//! Without an executor named: wavefront on several devices; on one, streaming when the planner is
//! sampled by Euler steps ([`Executor::default_for`]), else serial.

use ff_sched::exec::Placement;
use ff_sched::schedule::{Graph, NodeKind};

/// How the forwards of a schedule are spread over workers (`serial`, `wavefront`, `streaming`,
/// `batched`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Executor {
    /// Every forward on one worker, in order.
    Serial,
    /// One worker per stage: chunk i at stage k overlaps chunk i+1 at stage k-1.
    Wavefront,
    /// The wavefront plus a dedicated planner worker publishing anchors while rendering runs.
    Streaming,
    /// One worker; each dependency wave (FlashForward: an anti-diagonal) as one packed forward.
    Batched,
}

impl std::str::FromStr for Executor {
    type Err = crate::Error;

    fn from_str(s: &str) -> crate::Result<Self> {
        match s {
            "serial" => Ok(Self::Serial),
            "wavefront" => Ok(Self::Wavefront),
            "streaming" => Ok(Self::Streaming),
            "batched" => Ok(Self::Batched),
            _ => Err(crate::Error::Invalid(format!("unknown executor '{s}' (expected serial, wavefront, streaming or batched)"))),
        }
    }
}

impl std::fmt::Display for Executor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(match self {
            Self::Serial => "serial",
            Self::Wavefront => "wavefront",
            Self::Streaming => "streaming",
            Self::Batched => "batched",
        })
    }
}

impl Executor {
    /// The executor when none is named: wavefront on several devices; on one,
    /// streaming when `graph`'s planner is sampled by Euler steps (a block costs one or two
    /// forwards per step, and the planner is the critical path: its worker publishes the later
    /// blocks while the stage workers render the first chunks), else serial. Every executor
    /// draws the same video.
    pub fn default_for(graph: &Graph, devices: usize) -> Self {
        let euler_planner = graph.contract.planner_euler() && graph.nodes.iter().any(|n| n.kind == NodeKind::PlannerDenoise);
        match (devices > 1, euler_planner) {
            (true, _) => Self::Wavefront,
            (false, true) => Self::Streaming,
            (false, false) => Self::Serial,
        }
    }

    /// The placement for a schedule of `stages` stages on `devices` devices.
    pub fn placement(self, stages: usize, devices: usize) -> Placement {
        let stage_workers = if devices > 1 { devices } else { stages };
        match self {
            Self::Serial | Self::Batched => Placement::serial(),
            Self::Wavefront => Placement::wavefront(stage_workers),
            Self::Streaming => Placement::streaming(stage_workers.saturating_sub(usize::from(devices > 1)).max(1)),
        }
    }
}

/// One K/V exchange endpoint per stage worker of a context-parallel `placement`, each on its
/// worker's device (none for other placements), in worker order.
pub fn planner_shards<B: ff_model::AttentionBackend>(placement: &Placement, devices: &[B::Device]) -> Vec<ff_model::dit::ThreadGather<B>> {
    if placement.planner != ff_sched::exec::PlannerPlacement::Sharded {
        return Vec::new();
    }
    let on: Vec<B::Device> = (0..placement.stage_workers).map(|w| devices[device_of(w, devices.len())].clone()).collect();
    ff_model::dit::ThreadGather::group(&on)
}

/// Device index of worker `worker` among `devices` devices (round-robin).
pub fn device_of(worker: usize, devices: usize) -> usize {
    worker % devices
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn executors_place_workers_per_stage_or_device() {
        let (cpu, four) = (1, 4);
        assert_eq!(Executor::Serial.placement(4, four).workers(), 1);
        assert_eq!(Executor::Batched.placement(4, four).workers(), 1);
        assert_eq!(Executor::Wavefront.placement(4, cpu).workers(), 4);
        assert_eq!(Executor::Wavefront.placement(4, four).workers(), 4);
        assert_eq!(Executor::Wavefront.placement(4, 2).workers(), 2);
        // Streaming: a planner worker beside the stage workers; on 4 GPUs, 3 stage workers + planner.
        assert_eq!(Executor::Streaming.placement(4, cpu).workers(), 5);
        assert_eq!(Executor::Streaming.placement(4, four).workers(), 4);
        assert_eq!((0..5).map(|w| device_of(w, four)).collect::<Vec<_>>(), [0, 1, 2, 3, 0]);
        assert_eq!("streaming".parse::<Executor>().unwrap(), Executor::Streaming);
        assert!("fast".parse::<Executor>().unwrap_err().to_string().contains("'fast'"));
    }

    #[test]
    fn the_default_streams_an_euler_planner_on_one_device() {
        use ff_sched::{Contract, ContractConfig, ScheduleKind};
        let graph = |kind: ScheduleKind, steps: usize| {
            kind.build(&Contract::new(ContractConfig::new(21).with_planner_steps(steps)).unwrap()).unwrap()
        };
        assert_eq!(Executor::default_for(&graph(ScheduleKind::FlashForward, 0), 1), Executor::Serial);
        assert_eq!(Executor::default_for(&graph(ScheduleKind::FlashForward, 20), 1), Executor::Streaming);
        assert_eq!(Executor::default_for(&graph(ScheduleKind::SelfForcing, 20), 1), Executor::Serial, "no planner");
        assert_eq!(Executor::default_for(&graph(ScheduleKind::FlashForward, 20), 2), Executor::Wavefront);
    }
}
