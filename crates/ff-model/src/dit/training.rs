//! Training-time forms of [`WanDit`]: the compute precision of a step and per-block activation
//! checkpointing.
//!
//! * [`WanDit::with_precision`]: the token path's parameters cast to a compute dtype (bf16), the
//!   f32 islands' parameters (time embedding and projection, role vectors, modulation tables, the
//!   cross-attention LayerNorm) left as they are. Under autodiff the cast is an op of the graph:
//!   a model whose parameters are f32 leaves (master weights) runs its forward and backward in
//!   the compute dtype, and its gradients arrive in f32 at the leaves.
//! * [`WanDit::with_block_checkpointing`]: each block of a packed forward
//!   ([`WanDit::forward_packed`], the Phase 1 layout) is one checkpointed region
//!   ([`AttentionBackend::checkpoint`]): the backward pass keeps each block's input and
//!   recomputes the block. Other forwards (chunks over published K/V, context-parallel shards)
//!   keep their activations.
//! * [`WanDit::with_context_parallel`]: each packed forward sharded by whole frames across
//!   devices ([`context_parallel`]: one scoped thread per shard, K/V all-gathered per layer), the
//!   prediction gathered on the latents' device. Differentiable: the shards' parts of the graph
//!   meet at the gathered prediction and at the parameters (moved to each shard's device by
//!   differentiable `to_device`).

use super::attention::Attend;
use super::block::DitBlock;
use super::kv::{LayerKv, TextContext};
use super::layout::{FrameLayout, SegmentMask};
use super::model::WanDit;
use super::parallel::{ShardReads, context_parallel};
use super::rope::RopeTable;
use crate::error::Result;
use crate::lora::RoleSelect;
use burn::module::{Module, ModuleMapper, ModuleVisitor, Param};
use burn::tensor::ops::FloatTensor;
use burn::tensor::{DType, Tensor, TensorPrimitive};
use kernels_cubecl::{AttentionBackend, BlockTable, Region};
use std::sync::Arc;

/// Whether the parameter at `module_path` belongs to an f32 island: the forward casts it to f32
/// wherever the token path's dtype is.
pub fn is_f32_island(module_path: &str) -> bool {
    let first = module_path.split('.').next().unwrap_or_default();
    matches!(first, "time_embedding" | "time_projection" | "role_embedding")
        || module_path.ends_with("modulation")
        || module_path.contains(".norm3.")
}

impl<B: AttentionBackend> WanDit<B> {
    /// This model with the token path's parameters in `dtype` and the f32 islands' as they are
    /// (see the module docs).
    pub fn with_precision(self, dtype: DType) -> Self {
        struct Cast {
            path: Vec<String>,
            dtype: DType,
        }
        impl<B: AttentionBackend> ModuleMapper<B> for Cast {
            fn enter_module(&mut self, name: &str, _: &str) {
                self.path.push(name.to_string());
            }
            fn exit_module(&mut self, _: &str, _: &str) {
                self.path.pop();
            }
            fn map_float<const D: usize>(&mut self, param: Param<Tensor<B, D>>) -> Param<Tensor<B, D>> {
                if is_f32_island(&self.path.join(".")) {
                    return param;
                }
                let (id, tensor, mapper) = param.consume();
                Param::from_mapped_value(id, tensor.cast(self.dtype), mapper)
            }
        }
        self.map(&mut Cast { path: Vec::new(), dtype })
    }

    /// This model with each block of its packed forwards checkpointed (`on`) or not.
    pub fn with_block_checkpointing(self, on: bool) -> Self {
        Self { checkpoint_blocks: on, ..self }
    }

    /// This model with each packed forward sharded across `devices` (fewer than two: not
    /// sharded).
    pub fn with_context_parallel(self, devices: Vec<B::Device>) -> Self {
        Self { context_parallel: devices, ..self }
    }
}

/// [`WanDit::forward_packed`] sharded across `model.context_parallel` (module docs).
pub(super) fn sharded_packed<B: AttentionBackend>(
    model: &WanDit<B>,
    latents: Tensor<B, 5>,
    timesteps: &[Vec<f64>],
    layout: &FrameLayout,
    text: &TextContext<B>,
    mask: &SegmentMask,
) -> Result<Tensor<B, 5>> {
    let home = latents.device();
    let pt = model.config.patch_size[0];
    let devices = &model.context_parallel;
    let parts = context_parallel::<B, _>(devices, layout.len(), |s, shard| {
        let device = &devices[s];
        let (replica, text) = match *device == home {
            true => (model.clone(), text.clone()),
            false => {
                let layers =
                    text.layers.iter().map(|l| LayerKv { k: l.k.clone().to_device(device), v: l.v.clone().to_device(device) }).collect();
                (model.clone().to_device(device), TextContext { layers })
            }
        };
        let frames = shard.frames.clone();
        let mine = latents.clone().narrow(2, frames.start * pt, frames.len() * pt).to_device(device);
        let steps: Vec<Vec<f64>> = timesteps.iter().map(|t| t.get(frames.clone()).map(<[f64]>::to_vec).unwrap_or_default()).collect();
        let out = replica.forward_shard(shard, mine, &steps, layout, &text, ShardReads::Packed(mask))?;
        Ok(out.prediction.to_device(&home))
    })?;
    Ok(Tensor::cat(parts, 2))
}

/// The float parameters of `module`, in visiting order.
fn parameters<B: AttentionBackend, M: Module<B>>(module: &M) -> Vec<FloatTensor<B>> {
    struct Collect<B: AttentionBackend>(Vec<FloatTensor<B>>);
    impl<B: AttentionBackend> ModuleVisitor<B> for Collect<B> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
            self.0.push(param.val().into_primitive().tensor());
        }
    }
    let mut collect = Collect(Vec::new());
    module.visit(&mut collect);
    collect.0
}

/// `module` with its float parameters replaced, in visiting order, by `values`.
fn with_parameters<B: AttentionBackend, M: Module<B>>(module: M, values: impl Iterator<Item = FloatTensor<B>>) -> M {
    struct Replace<I>(I);
    impl<B: AttentionBackend, I: Iterator<Item = FloatTensor<B>>> ModuleMapper<B> for Replace<I> {
        fn map_float<const D: usize>(&mut self, param: Param<Tensor<B, D>>) -> Param<Tensor<B, D>> {
            let (id, _, mapper) = param.consume();
            let value = self.0.next().expect("one value per parameter");
            Param::from_mapped_value(id, Tensor::from_primitive(TensorPrimitive::Float(value)), mapper)
        }
    }
    module.map(&mut Replace(values))
}

fn tensor<B: AttentionBackend, const D: usize>(t: FloatTensor<B>) -> Tensor<B, D> {
    Tensor::from_primitive(TensorPrimitive::Float(t))
}

/// [`DitBlock::forward`] of a packed sequence under `table` as one checkpointed region: its
/// inputs are `x`, `e`, the prompt's K/V of this layer and every parameter of the block.
#[allow(clippy::too_many_arguments)]
pub(super) fn checkpointed_block<B: AttentionBackend>(
    block: &DitBlock<B>,
    x: Tensor<B, 4>,
    e: Tensor<B, 3>,
    rope: &RopeTable<B>,
    roles: &RoleSelect<B>,
    text: &LayerKv<B>,
    table: &BlockTable,
    layer: usize,
) -> Tensor<B, 4> {
    let prim = |t: Tensor<B, 4>| t.into_primitive().tensor();
    let mut inputs = vec![prim(x), e.into_primitive().tensor(), prim(text.k.clone()), prim(text.v.clone())];
    inputs.extend(parameters(block));
    let (block, rope, roles, attend) = (block.clone(), rope.clone(), roles.clone(), table.clone());
    let region: Region<B> = Arc::new(move |inputs| {
        let mut inputs = inputs.into_iter();
        let mut next = || inputs.next().expect("the region's inputs");
        let (x, e, k, v) = (tensor(next()), tensor(next()), tensor(next()), tensor(next()));
        let block = with_parameters(block.clone(), inputs);
        let text = LayerKv { k, v };
        block.forward(x, e, &rope, &roles, &text, &Attend::Packed(attend.clone()), layer).0.into_primitive().tensor()
    });
    tensor(B::checkpoint(inputs, region))
}

#[cfg(test)]
mod tests {
    use super::super::*;
    use crate::lora::LoraConfig;
    use burn::backend::{Autodiff, Flex, NdArray};
    use burn::module::{Module, ModuleVisitor, Param};
    use burn::tensor::backend::AutodiffBackend;
    use burn::tensor::{DType, Distribution, Tensor};
    use kernels_cubecl::AttentionBackend;

    /// Every parameter's gradient, flattened, by module path.
    fn gradients<A: AutodiffBackend + AttentionBackend>(model: &WanDit<A>, grads: &A::Gradients) -> Vec<(String, Vec<f32>)> {
        struct Collect<'a, A: AutodiffBackend> {
            path: Vec<String>,
            grads: &'a A::Gradients,
            out: Vec<(String, Vec<f32>)>,
        }
        impl<A: AutodiffBackend> ModuleVisitor<A> for Collect<'_, A> {
            fn enter_module(&mut self, name: &str, _: &str) {
                self.path.push(name.to_string());
            }
            fn exit_module(&mut self, _: &str, _: &str) {
                self.path.pop();
            }
            fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<A, D>>) {
                let g = param.val().grad(self.grads).expect("every parameter has a gradient");
                self.out.push((self.path.join("."), g.cast(DType::F32).into_data().to_vec::<f32>().unwrap()));
            }
        }
        let mut collect = Collect { path: Vec::new(), grads, out: Vec::new() };
        model.visit(&mut collect);
        collect.out
    }

    /// A tiny model with roles, non-zero adapters and role vectors, and the inputs of a
    /// Phase-1-like packed step (block-causal 2-frame chunks, planner and renderer frames):
    /// context, latents, target. Made once per test, since Burn's RNG is shared by the tests'
    /// threads.
    fn setup<A: AutodiffBackend + AttentionBackend>() -> (WanDit<A>, [Tensor<A, 5>; 2], Tensor<A, 3>) {
        let device = Default::default();
        let random = |shape: [usize; 5]| Tensor::<A, 5>::random(shape, Distribution::Normal(0.0, 1.0), &device);
        let mut model = DitConfig::tiny().init::<A>(&device).with_roles(&LoraConfig::new(4));
        model.role_embedding = model.role_embedding.map(|t| Param::from_tensor(t.val().random_like(Distribution::Normal(0.0, 0.5))));
        for b in &mut model.blocks {
            for a in b.self_attn.q.adapters.iter_mut().chain(&mut b.cross_attn.o.adapters) {
                a.b = Param::from_tensor(a.b.val().random_like(Distribution::Normal(0.0, 0.05)));
            }
        }
        let context = Tensor::<A, 3>::random([1, 5, 24], Distribution::Normal(0.0, 1.0), &device);
        (model, [random([1, 16, 6, 4, 4]), random([1, 16, 6, 4, 4])], context)
    }

    /// The packed step's loss and every parameter's gradient; `prepare` turns the f32 model
    /// into the one that runs.
    fn packed_step<A: AutodiffBackend + AttentionBackend>(
        (model, [latents, target], context): &(WanDit<A>, [Tensor<A, 5>; 2], Tensor<A, 3>),
        prepare: impl Fn(WanDit<A>) -> WanDit<A>,
    ) -> (f32, Vec<(String, Vec<f32>)>) {
        let run = prepare(model.clone());
        let layout = FrameLayout {
            positions: vec![0, 9, 2, 3, 4, 5],
            roles: [[Role::Planner; 2], [Role::Renderer; 2], [Role::Renderer; 2]].concat(),
        };
        let mask = SegmentMask::block_causal(6, 2);
        let timesteps = vec![vec![0.0, 0.0, 937.0, 937.0, 500.0, 500.0]];
        let pred = run.forward_packed(latents.clone(), &timesteps, &layout, &run.text_context(context.clone()), &mask).unwrap();
        let loss = (pred - target.clone()).powi_scalar(2).mean();
        let grads = loss.backward();
        (loss.into_scalar().elem(), gradients(model, &grads))
    }

    use burn::tensor::ElementConversion;

    #[test]
    fn block_checkpointing_gives_the_loss_and_gradients_of_the_full_graph() {
        // Bit for bit: the recomputed blocks run the same ops on the same values, and every sum
        // of gradient terms (the modulation input `e`, shared by 2 blocks) has two terms.
        let setup = setup::<Autodiff<NdArray>>();
        let (loss, want) = packed_step(&setup, |m| m);
        let (checkpointed_loss, got) = packed_step(&setup, |m| m.with_block_checkpointing(true));
        assert_eq!(loss, checkpointed_loss);
        assert_eq!(want.len(), got.len());
        for ((path, w), (_, g)) in want.iter().zip(&got) {
            assert_eq!(w, g, "gradient of {path}");
        }
    }

    #[test]
    fn bf16_compute_keeps_the_islands_and_returns_f32_gradients_near_the_f32_ones() {
        // The f32 model is the leaves (master weights); the bf16 copy is a cast inside the graph.
        // bf16 keeps 8 significant bits (relative rounding 2⁻⁹ ≈ 0.2 % per value); over the tiny
        // model's 2 blocks the gradients' relative L2 error stays within 5 %, against 0 for f32.
        type A = Autodiff<Flex>;
        let device = Default::default();
        let m = DitConfig::tiny().init::<A>(&device).with_roles(&LoraConfig::new(4)).with_precision(DType::BF16);
        assert_eq!(m.dtype(), DType::BF16);
        let b = &m.blocks[0];
        assert_eq!(b.self_attn.q.base.weight.val().dtype(), DType::BF16);
        assert_eq!(b.self_attn.q.adapters[0].a.val().dtype(), DType::BF16);
        assert_eq!(b.self_attn.norm_q.gamma.val().dtype(), DType::BF16);
        for island in [b.modulation.val().dtype(), b.norm3.gamma.val().dtype(), m.time_projection.weight.val().dtype()] {
            assert_eq!(island, DType::F32);
        }
        assert_eq!(m.role_embedding.as_ref().unwrap().val().dtype(), DType::F32);

        let setup = setup::<A>();
        let (loss, want) = packed_step(&setup, |m| m);
        let (half_loss, got) = packed_step(&setup, |m| m.with_precision(DType::BF16).with_block_checkpointing(true));
        assert!((half_loss - loss).abs() <= 0.02 * loss, "bf16 loss {half_loss} against f32 {loss}");
        let (mut diff, mut norm) = (0.0f64, 0.0f64);
        for ((path, w), (_, g)) in want.iter().zip(&got) {
            assert_eq!(w.len(), g.len(), "{path}: gradients of the f32 leaves");
            diff += w.iter().zip(g).map(|(a, b)| f64::from(a - b).powi(2)).sum::<f64>();
            norm += w.iter().map(|a| f64::from(*a).powi(2)).sum::<f64>();
        }
        let rel = (diff / norm).sqrt();
        eprintln!("bf16 against f32: loss {half_loss} against {loss}, gradients' relative L2 error {rel:.2e}");
        assert!(rel > 0.0 && rel <= 0.05, "bf16 gradients: relative L2 error {rel}");
    }
}
