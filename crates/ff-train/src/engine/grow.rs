//! [`grow`]: a trained DiT deepened to more blocks without changing what it computes, so that a
//! deeper teacher continues from a shallower one instead of from random weights. Block `i` of
//! the `n`-block model becomes block `i·k` of the `k·n`-block one; each block in between is a
//! fresh block whose three residual branches (self-attention, cross-attention, FFN) end in a zero
//! output projection, so its gated residual adds exactly zero until training moves those
//! projections (the zero-initialised residual of deep ResNets and DiTs). Embeddings, time
//! projection and head are the trained model's.

use crate::TrainError;
use burn::module::Param;
use burn::nn::Linear;
use burn::tensor::backend::Backend;
use ff_model::dit::DitBlock;
use ff_model::{AttentionBackend, DitConfig, WanDit};

/// `model` with the blocks of `target` (same config but for `num_layers`, a multiple of the
/// model's); `model` itself when the configs are equal. Models with roles are refused.
pub fn grow<B: AttentionBackend>(model: WanDit<B>, target: &DitConfig) -> crate::Result<WanDit<B>> {
    let have = model.config().clone();
    if &have == target {
        return Ok(model);
    }
    let (old, new) = (have.num_layers, target.num_layers);
    let same_but_depth = DitConfig { num_layers: new, ..have.clone() } == *target;
    if !same_but_depth || new <= old || !new.is_multiple_of(old) {
        return Err(TrainError::Config(format!(
            "cannot grow a DiT {have:?} into {target:?}: only num_layers may differ, as a multiple of {old}"
        )));
    }
    if model.role_embedding.is_some() {
        return Err(TrainError::Config("cannot grow a DiT with roles".into()));
    }
    let fresh = target.init::<B>(&model.device());
    let mut trained = model.blocks.into_iter();
    let per = new / old;
    let blocks = fresh.blocks.into_iter().enumerate().map(|(i, b)| if i % per == 0 { trained.next() } else { Some(silenced(b)) });
    let blocks = blocks.collect::<Option<Vec<_>>>().expect("one trained block per group");
    Ok(WanDit { blocks, config: target.clone(), ..model })
}

/// `block` with the output projections of its residual branches zeroed.
fn silenced<B: AttentionBackend>(mut block: DitBlock<B>) -> DitBlock<B> {
    block.self_attn.o.base = zeroed(block.self_attn.o.base);
    block.cross_attn.o.base = zeroed(block.cross_attn.o.base);
    block.ffn.fc2 = zeroed(block.ffn.fc2);
    block
}

fn zeroed<B: Backend>(linear: Linear<B>) -> Linear<B> {
    Linear {
        weight: Param::from_tensor(linear.weight.val().zeros_like()),
        bias: linear.bias.map(|b| Param::from_tensor(b.val().zeros_like())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TrainRng;
    use crate::engine::tests::B;
    use ff_model::Role;

    #[test]
    fn a_grown_dit_computes_what_it_grew_from_and_its_new_blocks_learn() {
        use burn::tensor::Tensor;
        let device = Default::default();
        let small = DitConfig::tiny().with_text_len(8).init::<B>(&device);
        let deep_config = DitConfig { num_layers: 6, ..small.config().clone() };
        let grown = grow(small.clone(), &deep_config).unwrap();
        assert_eq!((grown.blocks.len(), grown.config()), (6, &deep_config));
        let latents = || Tensor::<B, 4>::from_data(TrainRng::new(3).normal_data(vec![16, 2, 4, 4]), &device).unsqueeze::<5>();
        let prompt =
            |m: &WanDit<B>| m.text_context(Tensor::<B, 2>::from_data(TrainRng::new(4).normal_data(vec![8, 24]), &device).unsqueeze());
        let run = |m: &WanDit<B>| m.forward(latents(), &[vec![500.0; 2]], &prompt(m), Role::Base).unwrap();
        let (before, after) = (run(&small), run(&grown));
        assert_eq!(before.to_data(), after.clone().to_data(), "the grown DiT computes the same prediction");
        let grads = after.square().mean().backward();
        let new_block = &grown.blocks[1];
        let moved = new_block.self_attn.o.base.weight.grad(&grads).unwrap().abs().max().into_scalar();
        assert!(moved > 0.0, "the silenced projections get gradients");
        let err = grow(small.clone(), &DitConfig { num_layers: 5, ..small.config().clone() }).unwrap_err().to_string();
        assert!(err.contains("multiple of 2"), "{err}");
        assert!(grow(small.clone(), &DitConfig { num_layers: 4, dim: 64, ..small.config().clone() }).is_err(), "only the depth may change");
    }
}
