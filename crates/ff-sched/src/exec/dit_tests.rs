//! Executors with the tiny random DiT on NdArray: every placement gives bit-identical latents.

use super::*;
use crate::bank::KvDims;
use crate::contract::{Contract, ContractConfig};
use crate::schedule::{ScheduleKind, Unit};
use burn::backend::NdArray;
use burn::tensor::{Distribution, Tensor};
use ff_model::dit::{DitConfig, WanDit};

type B = NdArray;
const SIDE: usize = 4;

fn setup(config: ContractConfig) -> (Contract, WanDit<B>, Tensor<B, 3>) {
    let dev = Default::default();
    let dit = DitConfig::tiny();
    let text = Tensor::random([1, 6, dit.text_dim], Distribution::Normal(0.0, 1.0), &dev);
    (Contract::new(config).unwrap(), dit.init::<B>(&dev), text)
}

fn generate(kind: ScheduleKind, contract: &Contract, model: &WanDit<B>, text: &Tensor<B, 3>, p: Placement) -> Execution<Tensor<B, 5>> {
    let noise = NoiseSpec { seed: 3, channels: model.config().in_channels, height: SIDE, width: SIDE };
    let runner = DitRunner::new(model, text.clone(), contract, noise);
    let graph = kind.build(contract).unwrap();
    execute(&graph, &p, vec![runner; p.workers()]).unwrap()
}

fn video(e: &Execution<Tensor<B, 5>>) -> Vec<f32> {
    Tensor::cat(e.outputs.clone(), 2).into_data().to_vec().unwrap()
}

#[test]
fn flashforward_executors_are_bit_identical_to_serial() {
    let (c, model, text) = setup(ContractConfig::new(21));
    let serial = generate(ScheduleKind::FlashForward, &c, &model, &text, Placement::serial());
    let want = video(&serial);
    assert_eq!(want.len(), 16 * 21 * SIDE * SIDE);
    assert!(want.iter().all(|x| x.is_finite()));
    for p in [Placement::wavefront(4), Placement::streaming(4)] {
        assert_eq!(video(&generate(ScheduleKind::FlashForward, &c, &model, &text, p)), want, "{p:?}");
    }
}

/// FlashForward-CP: every planner forward sharded over 2 and 3 stage workers (L = 41: 5 anchors
/// in blocks of 3 and 2, so with 3 devices one shard idles on the second block) gives the serial
/// video bit for bit, and each planner forward runs on every worker at once.
#[test]
fn a_context_parallel_planner_is_bit_identical_to_serial() {
    let (c, model, text) = setup(ContractConfig::new(41).with_stages(3));
    let want = video(&generate(ScheduleKind::FlashForward, &c, &model, &text, Placement::serial()));
    let graph = ScheduleKind::FlashForward.build(&c).unwrap();
    let noise = NoiseSpec { seed: 3, channels: model.config().in_channels, height: SIDE, width: SIDE };
    let runner = DitRunner::new(&model, text.clone(), &c, noise);
    for d in [2, 3] {
        let p = Placement::context_parallel(d);
        let ends = ff_model::dit::ThreadGather::<B>::group(&vec![Default::default(); d]);
        let runners: Vec<_> = ends.into_iter().map(|e| runner.clone().with_planner_shard(e)).collect();
        let run = execute(&graph, &p, runners).unwrap();
        assert_eq!(video(&run), want, "{d} devices");
        for n in graph.nodes.iter().filter(|n| n.kind.is_planner()) {
            let spans: Vec<_> = run.trace.spans.iter().filter(|s| s.node == n.id).collect();
            let mut on: Vec<usize> = spans.iter().map(|s| s.worker).collect();
            on.sort_unstable();
            assert_eq!(on, (0..d).collect::<Vec<_>>(), "node {}", n.id);
            // the all-gathers are barriers: every shard is inside the forward at once
            let (last_start, first_end) = spans.iter().fold((0.0f64, f64::MAX), |(a, b), s| (a.max(s.start), b.min(s.end)));
            assert!(last_start < first_end, "node {}: shards do not overlap", n.id);
        }
    }
    let err = execute(&graph, &Placement::context_parallel(2), vec![runner.clone(), runner]).unwrap_err();
    assert!(err.to_string().contains("shard 0 of 2"), "{err}");
}

#[test]
fn baseline_executors_are_bit_identical_to_serial() {
    let (c, model, text) = setup(ContractConfig::new(13).with_stages(3));
    for kind in [ScheduleKind::Hiar, ScheduleKind::SelfForcing] {
        let want = video(&generate(kind, &c, &model, &text, Placement::serial()));
        assert_eq!(video(&generate(kind, &c, &model, &text, Placement::wavefront(3))), want, "{kind}");
    }
}

#[test]
fn anchors_and_history_reach_the_model() {
    let (c, model, text) = setup(ContractConfig::new(12).with_stages(2));
    let full = video(&generate(ScheduleKind::FlashForward, &c, &model, &text, Placement::serial()));
    for ablated in [ContractConfig::new(12).with_stages(2).with_use_anchors(false), ContractConfig::new(12).with_stages(2).with_history(0)]
    {
        let c = Contract::new(ablated).unwrap();
        let other = video(&generate(ScheduleKind::FlashForward, &c, &model, &text, Placement::serial()));
        // chunk 0 at stage 0 reads no history, but its anchors; every later forward differs
        let diff = full.iter().zip(&other).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
        assert!(diff > 1e-4, "ablation changed nothing ({diff})");
    }
}

#[test]
fn measured_bank_bytes_match_the_plan() {
    let (c, model, text) = setup(ContractConfig::new(21));
    let e = generate(ScheduleKind::FlashForward, &c, &model, &text, Placement::wavefront(4));
    let dims = KvDims::from_dit(model.config(), SIDE, SIDE, 4);
    // stage workers 1..3 fill their 3 anchor slots and their 5-chunk stage bank
    for w in 1..4 {
        assert_eq!(e.peak_bank_bytes[w], e.banks[w].bytes(&dims), "worker {w}");
    }
    assert!(e.peak_bank_bytes[0] <= e.banks[0].bytes(&dims));
}

#[test]
fn batched_diagonal_matches_serial() {
    let (c, model, text) = setup(ContractConfig::new(21));
    for kind in [ScheduleKind::FlashForward, ScheduleKind::Hiar] {
        let want = video(&generate(kind, &c, &model, &text, Placement::serial()));
        let noise = NoiseSpec { seed: 3, channels: model.config().in_channels, height: SIDE, width: SIDE };
        let graph = kind.build(&c).unwrap();
        let batched = execute_batched(&graph, DitRunner::new(&model, text.clone(), &c, noise)).unwrap();
        assert!(batched.forwards < graph.nodes.len(), "{kind}: nodes are batched");
        // same keys in the same order per node, no padding: bit-identical to serial
        assert_eq!(want, video(&batched), "{kind}");
    }
}

#[test]
fn planner_nodes_run_the_planner_role() {
    use burn::module::Param;
    use ff_model::LoraConfig;
    let (c, plain, text) = setup(ContractConfig::new(12).with_stages(2));
    // a role model whose planner role vector is random and whose renderer role is the backbone
    let dim = plain.config().dim;
    let mut roles = plain.clone().with_roles(&LoraConfig::new(2));
    let dev = Default::default();
    let table = Tensor::cat(vec![Tensor::random([1, dim], Distribution::Normal(0.0, 1.0), &dev), Tensor::zeros([1, dim], &dev)], 0);
    roles.role_embedding = Some(Param::from_tensor(table));
    let run = |model: &WanDit<B>, kind| video(&generate(kind, &c, model, &text, Placement::serial()));
    assert_eq!(run(&roles, ScheduleKind::SelfForcing), run(&plain, ScheduleKind::SelfForcing));
    let (a, b) = (run(&roles, ScheduleKind::FlashForward), run(&plain, ScheduleKind::FlashForward));
    let diff = a.iter().zip(&b).fold(0.0f32, |m, (x, y)| m.max((x - y).abs()));
    assert!(diff > 1e-4, "the planner role changed nothing ({diff})");
}

/// Records the keys every layer's self-attention is handed.
struct CountingContext<'a> {
    inner: ff_model::dit::SegmentContext<'a, B>,
    keys: std::cell::RefCell<Vec<usize>>,
}

impl ff_model::dit::KvContext<B> for CountingContext<'_> {
    fn keys(&self, layer: usize, own: &ff_model::dit::LayerKv<B>) -> Vec<ff_model::dit::Keys<B>> {
        let keys = self.inner.keys(layer, own);
        self.keys.borrow_mut().push(keys.iter().map(|k| k.kv.tokens()).sum());
        keys
    }
}

/// (node, keys per layer) of every forward.
type Seen = std::sync::Arc<std::sync::Mutex<Vec<(usize, Vec<usize>)>>>;

/// Runs every node with the DiT runner and, beside it, the same forward over a context that
/// counts keys; the two x0 must agree to float rounding, and the count must be the contract's.
struct KeyCount {
    runner: DitRunner<B>,
    model: WanDit<B>,
    text: ff_model::dit::TextContext<B>,
    noise: NoiseSpec,
    contract: Contract,
    seen: Seen,
}

impl Runner for KeyCount {
    type Latent = Tensor<B, 5>;
    type Kv = ff_model::dit::ChunkKv<B>;

    fn run(&mut self, node: &crate::schedule::Node, source: Option<&Tensor<B, 5>>, reads: &[&Self::Kv]) -> Result<NodeResult<Self>> {
        let (x0, kvs) = self.runner.run(node, source, reads)?;
        let stream = if node.kind.is_planner() { super::noise::PLANNER_STREAM } else { super::noise::OUTPUT_STREAM };
        let sigma = self.contract.sigma(node.level);
        let eps = || self.noise.sample::<B>(stream, &node.positions, node.level, &Default::default());
        let x = match source {
            None => eps(),
            Some(x0) if node.level == self.contract.stages() => x0.clone(),
            Some(x0) => ff_model::FlowMatch::noise(x0.clone(), eps(), sigma),
        };
        let ctx = CountingContext { inner: ff_model::dit::SegmentContext::new(reads.to_vec()), keys: Default::default() };
        let layout = ff_model::dit::FrameLayout::frames(node.positions.clone(), ff_model::dit::Role::Base);
        let out = self.model.forward_chunk(x.clone(), std::slice::from_ref(&node.timesteps), &layout, &self.text, &ctx).unwrap();
        let reference = ff_model::FlowMatch::x0_from_v(x, out.prediction, sigma);
        // The runner reads its keys through in-place windows whose slot order differs from the
        // concatenation's once the history ring wraps: the same keys, another summation order.
        let diff: f32 = (reference - x0.clone()).abs().max().into_scalar();
        assert!(diff < 1e-5, "node {}: the runner attended over other keys (max |Δx0| = {diff})", node.id);
        self.seen.lock().unwrap().push((node.id, ctx.keys.into_inner()));
        Ok((x0, kvs))
    }
}

#[test]
fn every_forward_attends_over_its_window_its_history_and_itself() {
    let (c, model, text) = setup(ContractConfig::new(25));
    let noise = NoiseSpec { seed: 5, channels: model.config().in_channels, height: SIDE, width: SIDE };
    let graph = ScheduleKind::FlashForward.build(&c).unwrap();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let probe = KeyCount {
        runner: DitRunner::new(&model, text.clone(), &c, noise),
        text: model.text_context(text),
        model: model.clone(),
        noise,
        contract: c.clone(),
        seen: seen.clone(),
    };
    execute(&graph, &Placement::serial(), vec![probe]).unwrap();
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), graph.nodes.len());
    let tokens_per_frame = (SIDE / 2) * (SIDE / 2);
    let h = c.config.history;
    for (id, keys) in seen.iter() {
        let n = &graph.nodes[*id];
        // frames the contract says the forward sees: Γ(i) + Tail_H(i) + itself; planner: its
        // context anchors + its block
        let frames = match n.unit {
            Unit::Chunk(i) => c.window(i).len() + c.tail(i, h).map(|j| c.chunks[j].len()).sum::<usize>() + c.chunks[i].len(),
            Unit::Block(j) => c.planner_context(j).len() + c.blocks[j].len(),
            Unit::Clip => unreachable!("no clip nodes in FlashForward"),
        };
        assert_eq!(keys, &vec![frames * tokens_per_frame; model.config().num_layers], "node {id} {:?} level {}", n.unit, n.level);
    }
}

#[test]
fn runners_keep_only_the_roles_their_workers_run() {
    let (c, model, text) = setup(ContractConfig::new(12).with_stages(2));
    let graph = ScheduleKind::FlashForward.build(&c).unwrap();
    let p = Placement::streaming(2);
    let planner = Roles { planner: true, renderer: false };
    let renderer = Roles { planner: false, renderer: true };
    assert_eq!((Roles::of_workers(&graph, &p, &[2]), Roles::of_workers(&graph, &p, &[0, 1])), (planner, renderer));
    assert_eq!(Roles::of_workers(&graph, &Placement::serial(), &[0]), Roles { planner: true, renderer: true });
    let noise = NoiseSpec { seed: 3, channels: model.config().in_channels, height: SIDE, width: SIDE };
    let full = DitRunner::new(&model, text.clone(), &c, noise);
    // a plain model is one copy whatever the roles; a runner without a role refuses its nodes
    assert_eq!(full.weight_bytes(), full.for_roles(renderer).weight_bytes());
    let err = execute(&graph, &Placement::serial(), vec![full.for_roles(renderer)]).unwrap_err();
    assert!(err.to_string().contains("needs the planner model"), "{err}");
    let runners = (0..3).map(|w| full.for_roles(Roles::of_workers(&graph, &p, &[w]))).collect();
    let split = execute(&graph, &p, runners).unwrap();
    assert_eq!(video(&split), video(&generate(ScheduleKind::FlashForward, &c, &model, &text, Placement::serial())));
}
