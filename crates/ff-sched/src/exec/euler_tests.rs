//! The Euler planner sampler of the DiT runner against a hand-written guided Euler integration
//! of the same model, and its executors against each other.

use super::noise::PLANNER_STREAM;
use super::*;
use crate::contract::{Contract, ContractConfig};
use crate::schedule::{NodeKind, ScheduleKind, Unit};
use burn::backend::NdArray;
use burn::tensor::{Distribution, Tensor};
use ff_model::dit::{DitConfig, FrameLayout, Role, SegmentContext, WanDit};

type B = NdArray;
const SIDE: usize = 4;

struct Setup {
    contract: Contract,
    model: WanDit<B>,
    text: Tensor<B, 3>,
    empty: Tensor<B, 3>,
    noise: NoiseSpec,
}

fn setup(config: ContractConfig) -> Setup {
    let dev = Default::default();
    let dit = DitConfig::tiny();
    let model = dit.init::<B>(&dev);
    let text = || Tensor::random([1, 6, dit.text_dim], Distribution::Normal(0.0, 1.0), &dev);
    let noise = NoiseSpec { seed: 5, channels: dit.in_channels, height: SIDE, width: SIDE };
    Setup { contract: Contract::new(config).unwrap(), model, text: text(), empty: text(), noise }
}

impl Setup {
    fn runner(&self) -> DitRunner<B> {
        DitRunner::new(&self.model, self.text.clone(), &self.contract, self.noise).with_empty_prompt(self.empty.clone())
    }
}

fn max_diff(a: Tensor<B, 5>, b: Tensor<B, 5>) -> f32 {
    (a - b).abs().max().into_scalar()
}

#[test]
fn planner_steps_integrate_the_guided_flow_ode() {
    let (steps, guidance) = (3, 4.0);
    let s = setup(ContractConfig::new(12).with_stages(2).with_planner_steps(steps).with_planner_guidance(guidance));
    let graph = ScheduleKind::FlashForward.build(&s.contract).unwrap();
    let block: Vec<_> = graph.nodes.iter().filter(|n| n.unit == Unit::Block(0)).collect();
    assert!(block.iter().all(|n| n.reads.is_empty()), "the first block reads no anchors");
    let mut runner = s.runner();
    let mut x = None;
    let mut outputs = vec![];
    for node in &block {
        let (out, kv) = runner.run(node, x.as_ref(), &[]).unwrap();
        assert_eq!(kv.len(), if node.kind == NodeKind::PlannerCache { block[0].positions.len() } else { 0 });
        outputs.push(out.clone());
        x = Some(out);
    }

    // by hand: x_{l+1} = x_l + (σ_{l+1} − σ_l)·(v_∅ + g·(v_c − v_∅)) from the planner's noise
    let positions = &block[0].positions;
    let dev = Default::default();
    let (cond, empty) = (s.model.text_context(s.text.clone()), s.model.text_context(s.empty.clone()));
    let layout = FrameLayout::frames(positions.clone(), Role::Base);
    let sigmas = ff_model::flow::EulerSampler::new(steps, s.contract.config.shift).sigmas();
    let mut want = s.noise.sample::<B>(PLANNER_STREAM, positions, 0, &dev);
    for (l, pair) in sigmas.windows(2).enumerate() {
        let t = vec![vec![1000.0 * pair[0]; positions.len()]];
        let v = |text| s.model.forward_chunk(want.clone(), &t, &layout, text, &SegmentContext::empty()).unwrap().prediction;
        want = want.clone() + ff_model::flow::cfg(v(&empty), v(&cond), guidance) * (pair[1] - pair[0]);
        let diff = max_diff(outputs[l].clone(), want.clone());
        assert!(diff < 1e-4, "step {l}: {diff}");
    }
    // the cache forward, at t = 0, hands the clean anchors on unchanged
    assert_eq!(max_diff(outputs[steps].clone(), outputs[steps - 1].clone()), 0.0);
}

#[test]
fn guided_steps_need_the_empty_prompt() {
    let s = setup(ContractConfig::new(12).with_stages(2).with_planner_steps(2).with_planner_guidance(3.0));
    let graph = ScheduleKind::FlashForward.build(&s.contract).unwrap();
    let mut runner = DitRunner::new(&s.model, s.text.clone(), &s.contract, s.noise);
    let err = runner.run(&graph.nodes[0], None, &[]).unwrap_err().to_string();
    assert!(err.contains("with_empty_prompt"), "{err}");
}

#[test]
fn euler_planner_executors_are_bit_identical() {
    // anchors 0, 10, 20, 30, 31: two planner blocks, the second reading the first's anchors
    let s = setup(ContractConfig::new(32).with_stages(2).with_planner_steps(3).with_planner_guidance(2.5));
    let graph = ScheduleKind::FlashForward.build(&s.contract).unwrap();
    let video = |e: Execution<Tensor<B, 5>>| -> Vec<f32> { Tensor::cat(e.outputs, 2).into_data().to_vec().unwrap() };
    let want = video(execute(&graph, &Placement::serial(), vec![s.runner()]).unwrap());
    assert!(want.iter().all(|x| x.is_finite()));
    for p in [Placement::wavefront(2), Placement::streaming(2)] {
        assert_eq!(video(execute(&graph, &p, vec![s.runner(); p.workers()]).unwrap()), want, "{p:?}");
    }
    assert_eq!(video(execute_batched(&graph, s.runner()).unwrap()), want, "batched");
    // the planner's sampler reaches the renderer: the distilled planner's video differs
    let distilled = Contract::new(ContractConfig::new(32).with_stages(2)).unwrap();
    let g = ScheduleKind::FlashForward.build(&distilled).unwrap();
    let runner = DitRunner::new(&s.model, s.text.clone(), &distilled, s.noise);
    let other = video(execute(&g, &Placement::serial(), vec![runner]).unwrap());
    assert!(want.iter().zip(&other).any(|(a, b)| (a - b).abs() > 1e-4));
}
