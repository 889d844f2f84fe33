//! A context-parallel forward equals the unsharded one: chunk forwards over a published context
//! bit for bit, packed forwards under Autodiff with equal loss and gradients.

use super::*;
use crate::dit::{ChunkKv, DitConfig, Role, SegmentContext, SegmentMask, WanDit};
use crate::lora::LoraConfig;
use burn::backend::{Autodiff, NdArray};
use burn::module::Param;
use burn::tensor::{Distribution, Tensor, TensorData};
use kernels_cubecl::AttentionBackend;

fn random<Bk: AttentionBackend, const D: usize>(shape: [usize; D], device: &Bk::Device) -> Tensor<Bk, D> {
    Tensor::random(shape, Distribution::Normal(0.0, 1.0), device)
}

/// The tiny model with roles whose adapters and role vectors are not zero.
fn model<Bk: AttentionBackend>(device: &Bk::Device) -> WanDit<Bk> {
    let mut m = DitConfig::tiny().init::<Bk>(device).with_roles(&LoraConfig::new(4));
    m.role_embedding = m.role_embedding.as_ref().map(|t| Param::from_tensor(random::<Bk, 2>(t.dims(), device) * 0.5));
    for b in &mut m.blocks {
        for a in b.self_attn.q.adapters.iter_mut().chain(&mut b.self_attn.v.adapters) {
            a.b = Param::from_tensor(random::<Bk, 2>(a.b.dims(), device) * 0.05);
        }
    }
    m
}

fn bits<Bk: AttentionBackend, const D: usize>(t: &Tensor<Bk, D>) -> TensorData {
    t.clone().into_data()
}

#[test]
fn shards_are_balanced_runs_of_whole_frames() {
    assert_eq!(shard_frames(9, 2), vec![0..5, 5..9]);
    assert_eq!(shard_frames(155, 4).iter().map(|r| r.len()).collect::<Vec<_>>(), [39, 39, 39, 38]);
    assert_eq!(shard_frames(1, 3), vec![0..1]);
}

/// 7 frames at positions 10..17 over a published 3-frame context, as one forward and sharded
/// over 2 and 3 shards: the same prediction and published K/V, bit for bit (all-gather keeps
/// every query row's keys and their order).
#[test]
fn a_sharded_chunk_forward_equals_the_unsharded_one_bit_for_bit() {
    type B = NdArray;
    let device = Default::default();
    let model = model::<B>(&device);
    let text = model.text_context(random::<B, 3>([1, 5, 24], &device));
    let earlier = FrameLayout::chunk(7, 3, Role::Planner);
    let published: ChunkKv<B> = model
        .forward_chunk(random::<B, 5>([1, 16, 3, 4, 6], &device), &[vec![0.0; 3]], &earlier, &text, &SegmentContext::empty())
        .unwrap()
        .kv;
    let ctx = SegmentContext::new(vec![&published]);
    let (frames, layout) = (7, FrameLayout::chunk(10, 7, Role::Planner));
    let latents = random::<B, 5>([1, 16, frames, 4, 6], &device);
    let timesteps: Vec<f64> = (0..frames).map(|f| 900.0 - 50.0 * f as f64).collect();
    let whole = model.forward_chunk(latents.clone(), std::slice::from_ref(&timesteps), &layout, &text, &ctx).unwrap();
    for d in [2, 3] {
        let outs = context_parallel::<B, _>(&vec![device; d], frames, |_, shard| {
            let f = shard.frames.clone();
            let mine = latents.clone().narrow(2, f.start, f.len());
            model.forward_shard(shard, mine, &[timesteps[f].to_vec()], &layout, &text, ShardReads::Context(&ctx))
        })
        .unwrap();
        assert_eq!(outs.len(), d);
        let prediction = Tensor::cat(outs.iter().map(|o| o.prediction.clone()).collect(), 2);
        assert_eq!(bits(&prediction), bits(&whole.prediction), "prediction, {d} shards");
        for out in &outs {
            for (a, b) in out.kv.layers.iter().zip(&whole.kv.layers) {
                assert_eq!((bits(&a.k), bits(&a.v)), (bits(&b.k), bits(&b.v)), "published K/V, {d} shards");
            }
        }
    }
}

/// Phase 1's packed forward (block-causal over 3-frame chunks, 8 frames) under Autodiff, sharded
/// over 2 and 3 shards: prediction within 1e-6 of its largest entry, loss within 1e-6 relative,
/// every checked gradient within 1e-5 of its largest entry. f32 rounding only: under Autodiff the
/// attention runs Burn's tensor ops (matmuls over each query group) instead of the CPU kernel,
/// and a matmul over fewer query rows may round a row's sums differently in the last bits; the
/// loss's mean and the backward's sums over the shards run in another order than on one device.
/// A query row that saw a wrong key set would be off by orders more (the inference path is
/// bit-identical: the test above). With burn-autodiff 0.21.0 as published, about one run in
/// three failed at 3 shards (an op lost while the shards' threads built one graph); with the
/// vendored fix it passed 12 runs of 12.
#[test]
fn a_sharded_packed_step_has_the_unsharded_loss_and_gradients() {
    type A = Autodiff<NdArray>;
    let device = Default::default();
    let model = model::<A>(&device);
    let context = random::<A, 3>([1, 5, 24], &device);
    let frames = 8;
    let layout = FrameLayout::chunk(0, frames, Role::Renderer);
    let mask = SegmentMask::block_causal(frames, 3);
    let latents = random::<A, 5>([1, 16, frames, 4, 4], &device);
    let target = random::<A, 5>([1, 16, frames, 4, 4], &device);
    let timesteps: Vec<f64> = (0..frames).map(|f| 999.0 - 40.0 * f as f64).collect();
    let loss_of = |shards: usize| {
        let text = model.text_context(context.clone());
        let pred = if shards == 1 {
            model.forward_packed(latents.clone(), std::slice::from_ref(&timesteps), &layout, &text, &mask).unwrap()
        } else {
            let parts = context_parallel::<A, _>(&vec![device; shards], frames, |_, shard| {
                let f = shard.frames.clone();
                let mine = latents.clone().narrow(2, f.start, f.len());
                Ok(model.forward_shard(shard, mine, &[timesteps[f].to_vec()], &layout, &text, ShardReads::Packed(&mask))?.prediction)
            })
            .unwrap();
            Tensor::cat(parts, 2)
        };
        let loss = (pred.clone() - target.clone()).powi_scalar(2).mean();
        (pred.into_data().to_vec::<f32>().unwrap(), loss)
    };
    let grads_of = |shards: usize| {
        let (pred, loss) = loss_of(shards);
        let grads = loss.backward();
        let g = |p: &Param<Tensor<A, 2>>| p.grad(&grads).expect("gradient").into_data().to_vec::<f32>().unwrap();
        let b = &model.blocks[1];
        let per_param =
            vec![g(&b.self_attn.k.base.weight), g(&b.self_attn.q.adapters[1].b), g(&b.ffn.fc1.weight), g(&model.head.head.weight)];
        (pred, loss.into_scalar(), per_param)
    };
    let (pred, loss, want) = grads_of(1);
    for shards in [2, 3] {
        let (p, l, got) = grads_of(shards);
        let scale = pred.iter().fold(0.0f32, |m, x| m.max(x.abs()));
        let off = p.iter().zip(&pred).fold(0.0f32, |m, (a, b)| m.max((a - b).abs()));
        assert!(off <= 1e-6 * scale, "prediction off by {off} (scale {scale}), {shards} shards");
        assert!((l - loss).abs() <= 1e-6 * loss.abs(), "loss {l} against {loss}, {shards} shards");
        for (g, w) in got.iter().zip(&want) {
            let scale = w.iter().fold(0.0f32, |m, x| m.max(x.abs()));
            let diff = g.iter().zip(w).fold(0.0f32, |m, (a, b)| m.max((a - b).abs()));
            assert!(scale > 0.0 && diff <= 1e-5 * scale, "gradient off by {diff} (scale {scale}), {shards} shards");
        }
    }
}

#[test]
fn a_shard_that_fails_stops_its_peers_with_its_own_error() {
    type B = NdArray;
    let device = Default::default();
    let err = context_parallel::<B, ()>(&[device; 3], 6, |s, shard| {
        if s == 1 {
            return Err(ModelError::Input("shard 1 refuses".into()));
        }
        let own = LayerKv { k: Tensor::zeros([1, 1, 2, 1], &device), v: Tensor::zeros([1, 1, 2, 1], &device) };
        shard.exchange.all_gather(0, own).map(|_| ())
    })
    .unwrap_err();
    assert!(err.to_string().contains("shard 1 refuses"), "{err}");
}
