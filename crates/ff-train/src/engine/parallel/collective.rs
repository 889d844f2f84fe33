//! The data-parallel all-reduce on `burn-collective` 0.21: one peer per device thread inside a
//! process (its *local* level), one process per node through the global orchestrator that node 0
//! starts (its *global* level, over websockets).
//!
//! * [`Nodes`]: where this process stands (node count, rank, the coordinator `HOST:PORT`, the
//!   timeout of a collective call). Peer `rank · devices + d` is device `d` of node `rank`.
//! * Registration happens once per process and backend (burn-collective keeps one local server
//!   per backend type); node 0 first starts the orchestrator on the coordinator's port. Node
//!   `r`'s tensor data service listens on the coordinator's port + 1 + r.
//! * [`Collective::all_reduce`]: the sum of one flat `[n]` tensor over every peer. Local tree of
//!   arity 2, global ring. With two peers (two devices, or two nodes of one device) every sum is
//!   one addition `a + b`, which is commutative: the result is bit-identical to the previous
//!   fixed-order reduce and to accumulation. With more peers burn-collective orders the local sum
//!   by device id (ties, e.g. CPU workers, in hash order), so results can differ in the last bits
//!   between runs.
//! * One collective operation runs at a time in a process: a process-wide lock covers a step's
//!   workers and reduce (tests in one binary share burn-collective's server of their backend).
//!
//! What burn-collective 0.21 cannot do, and the workaround here:
//! * **A second multi-node all-reduce hangs.** Its nodes' sync (`SyncService::sync`, run at the
//!   end of every global all-reduce) compared and cleared a copy of the list of sync requests,
//!   so the list only grew and no sync after the first completed. The workspace patches the
//!   crate (`vendor/burn-collective`, `[patch.crates-io]`) to take one request per node out of
//!   the shared list; the crate is gone from Burn's main branch, so there is no newer release.
//! * **No timeout, and hangs on a dead peer.** A node that dies leaves the others waiting
//!   forever in the sync of the next all-reduce (`SyncService::sync` awaits a notification that
//!   never comes), and a peer that cannot be reached panics inside burn-collective's runtime
//!   task (`expect("Couldn't connect to peer for sync")`). Each call therefore runs on a
//!   detached watchdog thread and is awaited with [`Nodes::timeout`]; on time-out, or when the
//!   server task died (its reply channel closes), the step fails with [`TrainError::Collective`]
//!   naming the node, and the collective is marked broken (a multi-node one for good: the run
//!   ends, and restarting every node with `--resume` continues from the last checkpoint).
//! * **No clean shutdown.** The data service does not drain pending downloads on close, so a
//!   node that exits right after its last all-reduce can cut off a peer still downloading from
//!   it. [`Collective::barrier`] (the runner's last call) lets every node pass the last reduce
//!   before any exits; its own failure is only logged.
//! * Its servers bind `0.0.0.0` (hard-coded in burn-communication's `WsServer`) and its
//!   connection retries print to stdout.

use crate::{Result, TrainError};
use burn::tensor::backend::Backend;
use burn::tensor::{Tensor, TensorPrimitive};
use burn_collective::{AllReduceStrategy, CollectiveConfig, CollectiveError, PeerId, ReduceOperation};
use std::any::TypeId;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

/// Where this process stands among the nodes of a data-parallel run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Nodes {
    /// Processes (nodes) of the run, each with the same number of devices.
    pub count: usize,
    /// This node's index, `0..count`; node 0 starts the orchestrator and writes the run's files.
    pub rank: usize,
    /// `HOST:PORT` of the orchestrator (node 0's host); needed when `count > 1`.
    pub coordinator: Option<String>,
    /// How long a collective call (registration, all-reduce) may wait for the other peers before
    /// the step fails: longer than the slowest node's step, shorter than you care to wait on a
    /// dead one.
    pub timeout: Duration,
}

impl Default for Nodes {
    /// One node, no coordinator, a timeout of 10 minutes.
    fn default() -> Self {
        Self { count: 1, rank: 0, coordinator: None, timeout: Duration::from_secs(600) }
    }
}

impl Nodes {
    /// Whether this node writes the run's files (checkpoints, metrics, exports): node 0.
    pub fn writes(&self) -> bool {
        self.rank == 0
    }

    /// Checks the rank and, with more than one node, the coordinator's `HOST:PORT`; returns the
    /// host and port.
    pub fn validate(&self) -> Result<Option<(String, u16)>> {
        let bad = |m: String| Err(TrainError::Config(m));
        if self.count == 0 || self.rank >= self.count {
            return bad(format!("node rank {} is not below the node count {}", self.rank, self.count));
        }
        if self.timeout.is_zero() {
            return bad("the collective timeout must be positive".into());
        }
        if self.count == 1 {
            return Ok(None);
        }
        let Some(coordinator) = &self.coordinator else {
            return bad(format!("{} nodes need a coordinator HOST:PORT", self.count));
        };
        let parsed = coordinator.rsplit_once(':').and_then(|(h, p)| Some((h.to_string(), p.parse::<u16>().ok()?)));
        match parsed {
            Some((host, port)) if !host.is_empty() && usize::from(port) + self.count < usize::from(u16::MAX) => Ok(Some((host, port))),
            _ => bad(format!("coordinator '{coordinator}' is not HOST:PORT with room for {} data ports above it", self.count)),
        }
    }
}

/// What one backend's collective was registered with in this process.
#[derive(Clone, Debug, PartialEq)]
struct Registration {
    backend: TypeId,
    devices: usize,
    nodes: Nodes,
    /// Why an earlier call failed (the collective cannot be used again when multi-node).
    broken: Option<String>,
}

/// The registrations of this process; its lock serialises collective operations.
static REGISTERED: Mutex<Vec<Registration>> = Mutex::new(Vec::new());

/// The registered collective of one backend, held for one step's reduce (the process-wide lock).
pub struct Collective {
    guard: MutexGuard<'static, Vec<Registration>>,
    index: usize,
    /// The peer ids of this node's devices, in device order.
    pub peers: Vec<PeerId>,
}

impl Collective {
    /// The collective of backend `B` over `devices` on `nodes`, registered on first use (node 0
    /// starting the orchestrator). Waits for the process-wide lock.
    pub fn acquire<B: Backend>(devices: &[B::Device], nodes: &Nodes) -> Result<Self> {
        let endpoints = nodes.validate()?;
        let mut guard = REGISTERED.lock().unwrap_or_else(|p| p.into_inner());
        let backend = TypeId::of::<B>();
        let wanted = Registration { backend, devices: devices.len(), nodes: nodes.clone(), broken: None };
        let index = match guard.iter().position(|r| r.backend == backend) {
            Some(i) if guard[i] == wanted => i,
            Some(i) if guard[i].nodes.count == 1 && nodes.count == 1 => {
                // A local collective of another layout, or a broken one: start it afresh.
                burn_collective::reset_collective::<B>();
                register::<B>(devices, nodes, None)?;
                guard[i] = wanted;
                i
            }
            Some(i) => {
                let was = &guard[i];
                let why = was.broken.clone().unwrap_or_else(|| format!("registered for {} devices on {:?}", was.devices, was.nodes));
                return Err(TrainError::Collective(format!("the multi-node collective of this process cannot be used again: {why}")));
            }
            None => {
                register::<B>(devices, nodes, endpoints)?;
                guard.push(wanted);
                guard.len() - 1
            }
        };
        let peers = (0..devices.len()).map(|d| PeerId::from(nodes.rank * devices.len() + d)).collect();
        Ok(Self { guard, index, peers })
    }

    fn nodes(&self) -> &Nodes {
        &self.guard[self.index].nodes
    }

    /// The sum of `tensor` over all peers, called by `peer`'s worker thread (every peer of every
    /// node must call it); waits at most the timeout.
    pub fn all_reduce<B: Backend>(&self, peer: PeerId, tensor: Tensor<B, 1>) -> Result<Tensor<B, 1>> {
        let primitive = tensor.into_primitive().tensor();
        let reduced = watch(self.nodes(), "all-reduce", move || burn_collective::all_reduce::<B>(peer, primitive, ReduceOperation::Sum))?;
        Ok(Tensor::from_primitive(TensorPrimitive::Float(reduced)))
    }

    /// Marks the collective broken after a failed call (`why`), so that later steps refuse it
    /// (a multi-node one) or register it afresh (a local one).
    pub fn fail(mut self, why: &str) {
        let index = self.index;
        self.guard[index].broken = Some(why.to_string());
        if self.guard[index].nodes.count == 1 {
            // Forces a fresh registration next time (the layout no longer matches).
            self.guard[index].devices = 0;
        }
    }

    /// Lets every node pass its last all-reduce before any node exits (see the module doc):
    /// a reduce of 64 zeros per device (burn-collective's ring needs one per node at least); a
    /// failure is logged, not returned.
    pub fn barrier<B: Backend>(self, devices: &[B::Device]) {
        let this = &self;
        let result: Result<()> = std::thread::scope(|s| {
            let handles: Vec<_> = this
                .peers
                .iter()
                .zip(devices)
                .map(|(&peer, device)| s.spawn(move || this.all_reduce::<B>(peer, Tensor::zeros([64], device)).map(drop)))
                .collect();
            handles.into_iter().try_for_each(|h| h.join().unwrap_or_else(|_| Err(TrainError::Worker("barrier thread panicked".into()))))
        });
        if let Err(e) = result {
            tracing::warn!(target: "ff_train::engine", error = %e, "closing barrier of the collective");
            self.fail(&e.to_string());
        }
    }
}

/// Registers one peer per device (each from its own thread, as burn-collective waits for all of
/// them); node 0 starts the orchestrator first.
fn register<B: Backend>(devices: &[B::Device], nodes: &Nodes, endpoints: Option<(String, u16)>) -> Result<()> {
    let mut config = CollectiveConfig::default().with_num_devices(devices.len()).with_local_all_reduce_strategy(AllReduceStrategy::Tree(2));
    if let Some((host, port)) = endpoints {
        if nodes.rank == 0 {
            start_orchestrator(port)?;
        }
        let data_port = port + 1 + nodes.rank as u16;
        let own = own_host(&host, port);
        config = config
            .with_num_nodes(nodes.count as u32)
            .with_global_address(format!("ws://{host}:{port}").parse().expect("infallible"))
            .with_node_address(format!("ws://{own}:{data_port}").parse().expect("infallible"))
            .with_data_service_port(data_port)
            .with_global_all_reduce_strategy(AllReduceStrategy::Ring);
        tracing::info!(target: "ff_train::engine", node = nodes.rank, nodes = nodes.count, coordinator = %format!("{host}:{port}"), data = %format!("{own}:{data_port}"), "joining the collective");
    }
    std::thread::scope(|s| {
        let handles: Vec<_> = devices
            .iter()
            .enumerate()
            .map(|(d, device)| {
                let (config, device) = (config.clone(), device.clone());
                let peer = PeerId::from(nodes.rank * devices.len() + d);
                s.spawn(move || watch(nodes, "registration", move || burn_collective::register::<B>(peer, device, config)))
            })
            .collect();
        handles.into_iter().try_for_each(|h| h.join().unwrap_or_else(|_| Err(TrainError::Worker("registration thread panicked".into()))))
    })
}

/// This machine's address as the coordinator sees it: the local end of a UDP socket pointed at
/// the coordinator (no packet is sent).
fn own_host(coordinator: &str, port: u16) -> String {
    let local = std::net::UdpSocket::bind(("0.0.0.0", 0)).and_then(|s| s.connect((coordinator, port)).and_then(|()| s.local_addr()));
    local.map(|a| a.ip().to_string()).unwrap_or_else(|_| coordinator.to_string())
}

/// Starts burn-collective's global orchestrator on `port` on a thread of its own (with a Tokio
/// runtime, which burn-collective's websocket server needs); a port in use is an error now.
fn start_orchestrator(port: u16) -> Result<()> {
    let taken = |e: std::io::Error| TrainError::Collective(format!("coordinator port {port}: {e}"));
    drop(std::net::TcpListener::bind(("0.0.0.0", port)).map_err(taken)?);
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().map_err(&taken)?;
    std::thread::Builder::new()
        .name("ff-orchestrator".into())
        .spawn(move || runtime.block_on(burn_collective::start_global_orchestrator(port)))
        .map_err(&taken)?;
    tracing::info!(target: "ff_train::engine", port, "orchestrator started");
    Ok(())
}

/// Runs the collective call `f` on a detached thread and waits for it at most `nodes.timeout`
/// (see the module doc: burn-collective has no timeout of its own).
fn watch<T: Send + 'static>(
    nodes: &Nodes,
    what: &str,
    f: impl FnOnce() -> std::result::Result<T, CollectiveError> + Send + 'static,
) -> Result<T> {
    let (tx, rx) = mpsc::channel();
    let spawned = std::thread::Builder::new().name(format!("ff-collective-{what}")).spawn(move || {
        let _ = tx.send(f());
    });
    spawned.map_err(|e| TrainError::Collective(format!("{what}: cannot start its thread: {e}")))?;
    let at = format!(
        "node {} of {}{}",
        nodes.rank,
        nodes.count,
        nodes.coordinator.as_ref().map(|c| format!(", coordinator {c}")).unwrap_or_default()
    );
    match rx.recv_timeout(nodes.timeout) {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(CollectiveError::LocalServerMissing)) | Err(RecvTimeoutError::Disconnected) => {
            Err(TrainError::Collective(format!("{what}: burn-collective's server stopped on {at}: a node stopped or lost its connection")))
        }
        Ok(Err(e)) => Err(TrainError::Collective(format!("{what} failed on {at}: {e:?}"))),
        Err(RecvTimeoutError::Timeout) => Err(TrainError::Collective(format!(
            "{what}: no answer from the other peers within {:?} on {at}: a node stopped, failed or cannot be reached",
            nodes.timeout
        ))),
    }
}
