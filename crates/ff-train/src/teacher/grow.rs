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
