//! Invariants of the DiT forwards on a random tiny model.

use super::*;
use crate::lora::LoraConfig;
use burn::backend::{Autodiff, NdArray};
use burn::module::Param;
use burn::tensor::{Distribution, Tensor};
use kernels_cubecl::AttentionBackend;

type B = NdArray;

fn max_abs<const D: usize>(a: Tensor<B, D>, b: Tensor<B, D>) -> f32 {
    (a - b).abs().max().into_scalar()
}

fn random<Bk: AttentionBackend, const D: usize>(shape: [usize; D], device: &Bk::Device) -> Tensor<Bk, D> {
    Tensor::random(shape, Distribution::Normal(0.0, 1.0), device)
}

/// Gives every adapter a non-zero `B` and every role a non-zero vector.
fn perturb_roles<Bk: AttentionBackend>(mut m: WanDit<Bk>) -> WanDit<Bk> {
    let device = m.device();
    let bump = |p: &Param<Tensor<Bk, 2>>| Param::from_tensor(random::<Bk, 2>(p.dims(), &device) * 0.05);
    m.role_embedding = m.role_embedding.as_ref().map(|t| Param::from_tensor(random::<Bk, 2>(t.dims(), &device) * 0.5));
    for b in &mut m.blocks {
        for lin in
            [&mut b.self_attn.q, &mut b.self_attn.k, &mut b.self_attn.v, &mut b.self_attn.o, &mut b.cross_attn.q, &mut b.cross_attn.o]
        {
            for a in &mut lin.adapters {
                a.b = bump(&a.b);
            }
        }
    }
    m
}

/// Three chunks of three frames, at different stages: packed under a block-causal chunk mask
/// equals chunk forwards run in order over the K/V the earlier ones published.
fn packed_equals_chunked<Bk: AttentionBackend>(device: &Bk::Device) -> f32 {
    let model = perturb_roles(DitConfig::tiny().init::<Bk>(device).with_roles(&LoraConfig::new(4)));
    let text = model.text_context(random::<Bk, 3>([1, 7, 24], device));
    let (chunks, f, h, w) = (3, 3, 4, 6);
    let latents = random::<Bk, 5>([1, 16, chunks * f, h, w], device);
    let timesteps: Vec<f64> = vec![999.0, 999.0, 999.0, 937.0, 937.0, 937.0, 624.0, 624.0, 624.0];
    let layout = FrameLayout::chunk(6, chunks * f, Role::Renderer);
    let mask = SegmentMask::block_causal(chunks * f, f);
    let packed = model.forward_packed(latents.clone(), std::slice::from_ref(&timesteps), &layout, &text, &mask).unwrap();

    let mut published: Vec<ChunkKv<Bk>> = Vec::new();
    let mut outs = Vec::new();
    for i in 0..chunks {
        let ctx = SegmentContext::new(published.iter().collect());
        let chunk = latents.clone().narrow(2, i * f, f);
        let out = model
            .forward_chunk(chunk, &[timesteps[i * f..(i + 1) * f].to_vec()], &FrameLayout::chunk(6 + i * f, f, Role::Renderer), &text, &ctx)
            .unwrap();
        assert_eq!(out.kv.tokens(), f * (h / 2) * (w / 2));
        outs.push(out.prediction);
        published.push(out.kv);
    }
    let chunked = Tensor::cat(outs, 2);
    (packed - chunked).abs().max().into_scalar().elem()
}

use burn::tensor::ElementConversion;

#[test]
fn packed_forward_equals_chunk_forwards_over_published_kv() {
    assert!(packed_equals_chunked::<B>(&Default::default()) <= 1e-5);
}

#[test]
fn packed_forward_is_differentiable() {
    let device = Default::default();
    assert!(packed_equals_chunked::<Autodiff<B>>(&device) <= 1e-5);
    let model = DitConfig::tiny().init::<Autodiff<B>>(&device).with_roles(&LoraConfig::new(2));
    let text = model.text_context(random::<Autodiff<B>, 3>([1, 5, 24], &device));
    let x = random::<Autodiff<B>, 5>([1, 16, 4, 4, 4], &device).require_grad();
    let layout = FrameLayout { positions: vec![0, 10, 3, 4], roles: vec![Role::Planner, Role::Planner, Role::Renderer, Role::Renderer] };
    let mask = SegmentMask::new(4).allow(0..2, 0..2).allow(2..4, 0..4);
    let y = model.forward_packed(x.clone(), &[vec![0.0, 0.0, 833.0, 833.0]], &layout, &text, &mask).unwrap();
    let grads = y.powi_scalar(2).sum().backward();
    let adapter_b = &model.blocks[0].self_attn.q.adapters[1].b;
    assert!(x.grad(&grads).is_some());
    assert!(adapter_b.val().grad(&grads).is_some(), "renderer adapters receive gradients");
}

#[test]
fn merged_role_model_equals_adapter_forward() {
    let device = Default::default();
    let model = perturb_roles(DitConfig::tiny().init::<B>(&device).with_roles(&LoraConfig::new(4).with_alpha(8.0)));
    let text_in = random::<B, 3>([1, 6, 24], &device);
    let latents = random::<B, 5>([1, 16, 3, 4, 4], &device);
    let ts = [vec![937.0, 937.0, 937.0]];
    for role in [Role::Planner, Role::Renderer] {
        let with_adapters = model.forward(latents.clone(), &ts, &model.text_context(text_in.clone()), role).unwrap();
        let merged = model.merge(role);
        assert!(merged.role_embedding.is_none() && merged.blocks[0].self_attn.q.adapters.is_empty());
        let plain = merged.forward(latents.clone(), &ts, &merged.text_context(text_in.clone()), Role::Base).unwrap();
        let base = model.forward(latents.clone(), &ts, &model.text_context(text_in.clone()), Role::Base).unwrap();
        assert!(max_abs(with_adapters.clone(), plain) <= 1e-5, "{role:?}");
        assert!(max_abs(with_adapters, base) > 1e-3, "{role:?} adapters change the output");
    }
}

#[test]
fn fresh_roles_start_as_the_backbone() {
    let device = Default::default();
    let plain = DitConfig::tiny().init::<B>(&device);
    let roles = plain.clone().with_roles(&LoraConfig::new(4));
    let text = plain.text_context(random::<B, 3>([1, 6, 24], &device));
    let latents = random::<B, 5>([1, 16, 2, 4, 4], &device);
    let ts = [vec![500.0, 500.0]];
    let a = plain.forward(latents.clone(), &ts, &text, Role::Base).unwrap();
    let b = roles.forward(latents, &ts, &text, Role::Planner).unwrap();
    let d = max_abs(a, b);
    assert!(d == 0.0, "{d}");
}

#[test]
fn context_changes_the_chunk_and_positions_are_absolute() {
    // A chunk reading one published segment differs from the same chunk alone; shifting every
    // position by the same offset (chunk and context together) leaves the output unchanged.
    let device = Default::default();
    let model = DitConfig::tiny().init::<B>(&device);
    let text = model.text_context(random::<B, 3>([1, 6, 24], &device));
    let (a, b) = (random::<B, 5>([1, 16, 3, 4, 4], &device), random::<B, 5>([1, 16, 3, 4, 4], &device));
    let ts = [vec![624.0; 3]];
    let run = |start: usize| {
        let first =
            model.forward_chunk(a.clone(), &ts, &FrameLayout::chunk(start, 3, Role::Base), &text, &SegmentContext::empty()).unwrap();
        let ctx = SegmentContext::new(vec![&first.kv]);
        model.forward_chunk(b.clone(), &ts, &FrameLayout::chunk(start + 3, 3, Role::Base), &text, &ctx).unwrap().prediction
    };
    let alone = model.forward_chunk(b.clone(), &ts, &FrameLayout::chunk(3, 3, Role::Base), &text, &SegmentContext::empty()).unwrap();
    assert!(max_abs(run(0), alone.prediction) > 1e-3);
    assert!(max_abs(run(0), run(40)) <= 1e-4);
}

#[test]
fn bad_inputs_are_errors() {
    let device = Default::default();
    let model = DitConfig::tiny().init::<B>(&device);
    let text = model.text_context(random::<B, 3>([1, 6, 24], &device));
    let x = random::<B, 5>([1, 16, 3, 4, 4], &device);
    let ctx = SegmentContext::empty();
    let far = model.forward_chunk(x.clone(), &[vec![0.0; 3]], &FrameLayout::chunk(1022, 3, Role::Base), &text, &ctx);
    assert!(far.err().unwrap().to_string().contains("past the table"));
    let wrong_t = model.forward_chunk(x.clone(), &[vec![0.0; 2]], &FrameLayout::chunk(0, 3, Role::Base), &text, &ctx);
    assert!(wrong_t.is_err());
    let role_on_plain = model.forward_chunk(x, &[vec![0.0; 3]], &FrameLayout::chunk(0, 3, Role::Planner), &text, &ctx);
    assert!(role_on_plain.err().unwrap().to_string().contains("with_roles"));
}

#[test]
fn kv_window_equals_concatenated_segments() {
    // Slots of one frame: anchors {0, 10, 20} in slots 0..3, then a ring of 4 chunk slots of 3
    // frames for H = 2 history chunks; chunks of 3 frames at positions 3, 6, ... read the
    // anchors, up to 2 earlier chunks and themselves. The ring is larger than the reads, so
    // stale chunks sit between read slots: the block table must skip them.
    let device = Default::default();
    let model = DitConfig::tiny().init::<B>(&device);
    let text = model.text_context(random::<B, 3>([1, 6, 24], &device));
    let per_frame = 4; // 4×4 latents, patch 2×2
    let anchors = model
        .forward_chunk(
            random::<B, 5>([1, 16, 3, 4, 4], &device),
            &[vec![0.0; 3]],
            &FrameLayout::frames(vec![0, 10, 20], Role::Base),
            &text,
            &SegmentContext::empty(),
        )
        .unwrap()
        .kv;
    let c = model.config();
    let mut window = KvWindow::<B>::new(c.num_layers, c.num_heads, c.head_dim(), per_frame, 3 + 4 * 3, &device);
    window.write(0, &anchors).unwrap();
    let ring = |i: usize| 3 + 3 * (i % 4);
    let mut history: Vec<ChunkKv<B>> = Vec::new();
    for i in 0..7 {
        let x = random::<B, 5>([1, 16, 3, 4, 4], &device);
        let layout = FrameLayout::chunk(3 + 3 * i, 3, Role::Base);
        let ts = [vec![833.0; 3]];
        let tail: Vec<&ChunkKv<B>> = history.iter().rev().take(2).collect();
        let reference = model.forward_chunk(x.clone(), &ts, &layout, &text, &SegmentContext::new([vec![&anchors], tail].concat())).unwrap();
        let reads = std::iter::once(0..3).chain((i.saturating_sub(2)..i).map(|j| ring(j)..ring(j) + 3));
        window.attend(reads, ring(i), 3).unwrap();
        let windowed = model.forward_chunk(x, &ts, &layout, &text, &window).unwrap();
        assert!(max_abs(reference.prediction, windowed.prediction) <= 1e-5, "chunk {i}");
        history.push(reference.kv);
    }
    // layers × (k, v) × slots × slot tokens × heads × head_dim × f32, independent of the chunks run
    assert_eq!(window.bytes(), 2 * 2 * 15 * 4 * 2 * 16 * 4);
    assert!(window.attend(std::iter::once(3..7), 6, 3).is_err(), "reads overlapping the target");
    assert!(window.attend(std::iter::empty(), 14, 3).is_err(), "target past the end");
}

#[test]
fn batched_chunks_equal_single_chunk_forwards() {
    // Two chunks at different positions, stages and contexts as one batch: each element equals
    // its own single forward (the batched anti-diagonal of a wavefront).
    let device = Default::default();
    let model = DitConfig::tiny().init::<B>(&device);
    let text = model.text_context(random::<B, 3>([1, 6, 24], &device));
    let ctx_a = model
        .forward_chunk(
            random::<B, 5>([1, 16, 3, 4, 4], &device),
            &[vec![999.0; 3]],
            &FrameLayout::chunk(0, 3, Role::Base),
            &text,
            &SegmentContext::empty(),
        )
        .unwrap()
        .kv;
    let ctx_b = model
        .forward_chunk(
            random::<B, 5>([1, 16, 3, 4, 4], &device),
            &[vec![624.0; 3]],
            &FrameLayout::chunk(3, 3, Role::Base),
            &text,
            &SegmentContext::empty(),
        )
        .unwrap()
        .kv;
    let (xa, xb) = (random::<B, 5>([1, 16, 3, 4, 4], &device), random::<B, 5>([1, 16, 3, 4, 4], &device));
    let (la, lb) = (FrameLayout::chunk(3, 3, Role::Base), FrameLayout::chunk(9, 3, Role::Base));
    let (ta, tb) = (vec![999.0; 3], vec![624.0; 3]);
    let single_a = model.forward_chunk(xa.clone(), std::slice::from_ref(&ta), &la, &text, &SegmentContext::new(vec![&ctx_a])).unwrap();
    let single_b = model.forward_chunk(xb.clone(), std::slice::from_ref(&tb), &lb, &text, &SegmentContext::new(vec![&ctx_b])).unwrap();
    let stacked = ChunkKv::stack(&[&ctx_a, &ctx_b]);
    let batch =
        model.forward_chunks(Tensor::cat(vec![xa, xb], 0), &[ta, tb], &[la, lb], &text, &SegmentContext::new(vec![&stacked])).unwrap();
    assert!(max_abs(batch.prediction.clone().narrow(0, 0, 1), single_a.prediction) <= 1e-5);
    assert!(max_abs(batch.prediction.narrow(0, 1, 1), single_b.prediction) <= 1e-5);
    assert!(max_abs(batch.kv.batch_element(1).layers[1].k.clone(), single_b.kv.layers[1].k.clone()) <= 1e-5);
}

#[test]
fn batch_elements_are_independent_for_other_shapes() {
    // A config unlike the shipped fixtures (3 heads × 24, text 40, 3 layers), batch 2 with
    // per-sample timesteps 500 and 3: each element equals its own batch-1 forward.
    let device = Default::default();
    let config = DitConfig::new([1, 2, 2], 16, 16, 72, 96, 256, 40, 3, 3);
    let model = config.init::<B>(&device);
    let (x, ctx) = (random::<B, 5>([2, 16, 5, 6, 10], &device), random::<B, 3>([2, 7, 40], &device));
    let both = model.forward(x.clone(), &[vec![500.0; 5], vec![3.0; 5]], &model.text_context(ctx.clone()), Role::Base).unwrap();
    for (b, t) in [(0, 500.0), (1, 3.0)] {
        let one =
            model.forward(x.clone().narrow(0, b, 1), &[vec![t; 5]], &model.text_context(ctx.clone().narrow(0, b, 1)), Role::Base).unwrap();
        assert!(max_abs(both.clone().narrow(0, b, 1), one) <= 1e-5, "element {b}");
    }
}

/// Casts every float parameter to a dtype.
struct CastParams(burn::tensor::DType);

impl<Bk: AttentionBackend> burn::module::ModuleMapper<Bk> for CastParams {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<Bk, D>>) -> Param<Tensor<Bk, D>> {
        param.map(|t| t.cast(self.0))
    }
}

#[test]
fn bf16_forward_on_flex_is_within_2e_2_of_f32() {
    use burn::backend::Flex;
    use burn::module::Module;
    use burn::tensor::DType;
    let dir = crate::fixture::dir().join("wan_dit_tiny");
    let config = DitConfig::from_json(dir.join("meta.json")).unwrap();
    let dev = Default::default();
    let f32_model = WanDit::<Flex>::load(&config, dir.join("weights_wan.safetensors"), &dev).unwrap();
    let bf16_model = f32_model.clone().map(&mut CastParams(DType::BF16));
    assert_eq!((f32_model.dtype(), bf16_model.dtype()), (DType::F32, DType::BF16));
    let inputs = crate::load::read_tensors(&dir.join("inputs.safetensors")).unwrap();
    let expected = crate::load::read_tensors(&dir.join("expected.safetensors")).unwrap()["output"].to_vec::<f32>().unwrap();
    let frames = inputs["latents"].shape[2];
    let timesteps: Vec<Vec<f64>> = inputs["timestep"].to_vec::<f32>().unwrap().iter().map(|&t| vec![t as f64; frames]).collect();
    let run = |m: &WanDit<Flex>| -> Vec<f32> {
        let text = m.text_context(Tensor::from_data(inputs["context"].clone(), &dev));
        let out = m.forward(Tensor::from_data(inputs["latents"].clone(), &dev), &timesteps, &text, Role::Base).unwrap();
        assert_eq!(out.dtype(), DType::F32, "predictions come back in f32");
        out.into_data().to_vec::<f32>().unwrap()
    };
    let rel = |a: &[f32], b: &[f32]| {
        let d: f64 = a.iter().zip(b).map(|(x, y)| ((x - y) as f64).powi(2)).sum();
        let n: f64 = b.iter().map(|y| (*y as f64).powi(2)).sum();
        (d / n).sqrt()
    };
    let full = run(&f32_model);
    assert!(rel(&full, &expected) <= 1e-4, "f32 on flex: {} against the fixture", rel(&full, &expected));
    let half = run(&bf16_model);
    let err = rel(&half, &full);
    assert!(err <= 2e-2, "bf16 vs f32: relative L2 error {err}");
    assert!(err > 0.0, "the bf16 forward ran in bf16");
}
