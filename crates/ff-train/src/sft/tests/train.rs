//! The loss against a hand computation, gradient routing between the roles, and a tiny model
//! overfitting one packed clip.

use super::{clip, small_config};
use crate::data::LatentClip;
use crate::sft::{Draw, Group, SftObjective, grouped_loss};
use crate::{Objective, TrainRng};
use burn::backend::{Autodiff, NdArray};
use burn::module::Param;
use burn::optim::{AdamConfig, GradientsParams, Optimizer};
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{Distribution, Tensor, TensorData};
use ff_model::WanDit;
use ff_model::dit::DitConfig;
use ff_model::lora::LoraConfig;

type Ad = Autodiff<NdArray>;

fn tiny_model(rank: usize) -> WanDit<Ad> {
    DitConfig::tiny().init::<Ad>(&Default::default()).with_roles(&LoraConfig::new(rank))
}

#[test]
fn loss_is_the_sum_of_per_group_token_means() {
    let objective = SftObjective::new(small_config()).unwrap();
    let layout = objective.layout(&[1, 3]);
    let (c, f, h, w) = (2, layout.len(), 2, 2);
    let mut rng = TrainRng::new(1);
    let (p, t) = (rng.normal_data(vec![1, c, f, h, w]), rng.normal_data(vec![1, c, f, h, w]));
    let device = Default::default();
    let (total, parts) = grouped_loss(Tensor::<NdArray, 5>::from_data(p.clone(), &device), Tensor::from_data(t.clone(), &device), &layout);
    let (p, t) = (p.to_vec::<f32>().unwrap(), t.to_vec::<f32>().unwrap());
    let mut want_total = 0.0;
    for (g, got) in parts {
        let frames = layout.group_frames(g);
        let mut sum = 0.0f64;
        for &fr in &frames {
            for ch in 0..c {
                for e in 0..h * w {
                    let i = (ch * f + fr) * h * w + e;
                    sum += ((p[i] - t[i]) as f64).powi(2);
                }
            }
        }
        let want = sum / (frames.len() * c * h * w) as f64;
        assert!((got.into_scalar() as f64 - want).abs() < 1e-5 * want.max(1.0), "group {g:?}");
        want_total += want;
    }
    assert!((total.into_scalar() as f64 - want_total).abs() < 1e-5 * want_total);
}

/// Largest |gradient| of the `b` matrices of role `r`'s adapters and of its role vector.
fn role_grads<B: AutodiffBackend<FloatElem = f32> + ff_model::AttentionBackend>(
    model: &WanDit<B>,
    grads: &B::Gradients,
    r: usize,
) -> (f32, f32) {
    let max = |p: &Param<Tensor<B, 2>>| p.val().grad(grads).map_or(0.0, |g| g.abs().max().into_scalar());
    let mut adapters: f32 = 0.0;
    for b in &model.blocks {
        for lin in [&b.self_attn.q, &b.self_attn.k, &b.self_attn.v, &b.self_attn.o, &b.cross_attn.q, &b.cross_attn.o] {
            adapters = adapters.max(max(&lin.adapters[r].b));
        }
    }
    let table = model.role_embedding.as_ref().unwrap();
    let row = table.val().grad(grads).map_or(0.0, |g| g.narrow(0, r, 1).abs().max().into_scalar());
    (adapters, row)
}

#[test]
fn gradients_reach_both_roles_and_cross_only_through_the_anchor_read() {
    let model = tiny_model(4);
    let objective = SftObjective::new(small_config()).unwrap();
    let clip = clip(12, 2);
    let draw = objective.draw(&clip, &mut TrainRng::new(4)).unwrap();
    let part = |g: Group| objective.loss_of(&model, &clip, &draw).unwrap().parts.iter().any(|(n, _)| *n == g.name());
    assert!(Group::ALL.into_iter().all(part));

    let loss = objective.loss_of(&model, &clip, &draw).unwrap();
    let grads = loss.total.backward();
    for r in 0..2 {
        let (adapters, row) = role_grads(&model, &grads, r);
        assert!(adapters > 0.0 && row > 0.0, "role {r}: adapter {adapters}, role vector {row}");
    }

    // Planner frames never read renderer frames: the planner groups give the renderer nothing.
    // The renderer reads clean planner copies: its loss trains the planner role too.
    let layout = objective.layout(&draw.offsets);
    let device = Default::default();
    let packed = crate::sft::pack::<Ad>(&clip.latents, None, &draw, &layout, &device);
    let group_loss = |g: Group| {
        let text = model.text_context(Tensor::<Ad, 2>::from_data(clip.prompt.clone(), &device).unsqueeze_dim(0));
        let prediction = model.forward_packed(
            packed.inputs.clone(),
            std::slice::from_ref(&packed.timesteps),
            &layout.frame_layout(),
            &text,
            &layout.mask,
        );
        let (_, parts) = grouped_loss(prediction.unwrap(), packed.targets.clone(), &layout);
        parts
            .into_iter()
            .filter(|(x, _)| g == *x || (g == Group::Planner && *x == Group::Rebased))
            .map(|(_, l)| l)
            .reduce(|a, b| a + b)
            .unwrap()
    };
    let planner_grads = group_loss(Group::Planner).backward();
    assert_eq!(role_grads(&model, &planner_grads, 1), (0.0, 0.0), "planner loss reaches the renderer");
    let renderer_grads = group_loss(Group::Renderer).backward();
    let (adapters, row) = role_grads(&model, &renderer_grads, 0);
    assert!(adapters > 0.0 && row > 0.0, "the renderer's anchor read trains the planner role");
}

#[test]
fn tiny_model_overfits_one_packed_clip() {
    let mut model = tiny_model(4);
    let objective = SftObjective::new(small_config()).unwrap();
    let clip = clip(12, 7);
    // One fixed draw (σ, ε, offsets): the model can memorise the clip.
    let draw: Draw = objective.draw(&clip, &mut TrainRng::new(9)).unwrap();
    let mut optim = AdamConfig::new().init::<Ad, WanDit<Ad>>();
    let mut losses = Vec::new();
    for _ in 0..120 {
        let loss = objective.loss_of(&model, &clip, &draw).unwrap();
        losses.push(loss.total.clone().into_scalar());
        let grads = GradientsParams::from_grads(loss.total.backward(), &model);
        model = optim.step(1e-2, model, grads);
        if losses[losses.len() - 1] < losses[0] / 10.0 {
            break;
        }
    }
    let (first, last) = (losses[0], losses[losses.len() - 1]);
    assert!(last < first / 10.0, "loss {first} → {last} after {} steps", losses.len());
    // The trait path draws from the run's RNG and gives the same loss for the same RNG state.
    let a: Tensor<Ad, 1> = objective.loss(&model, &clip, &mut TrainRng::new(3)).unwrap().total;
    let b: Tensor<Ad, 1> = objective.loss(&model, &clip, &mut TrainRng::new(3)).unwrap().total;
    assert_eq!(a.into_data(), b.into_data());
    let wrong = LatentClip { prompt: TensorData::new(vec![0f32; 10], [5, 2]), ..clip.clone() };
    assert!(objective.loss(&model, &wrong, &mut TrainRng::new(3)).err().unwrap().to_string().contains("prompt embedding [5, 2]"));
    let short = LatentClip {
        latents: Tensor::<NdArray, 4>::random([16, 11, 4, 4], Distribution::Default, &Default::default()).into_data(),
        ..clip
    };
    assert!(objective.loss(&model, &short, &mut TrainRng::new(3)).err().unwrap().to_string().contains("≥ 12 latent frames"));
}

#[test]
fn sft_conditions_on_the_context_generate_builds() {
    // Cross-attention has no key mask: the zero rows up to `text_len` change its output, so the
    // SFT objective must see the exact context `generate` builds (`PromptEmbedding::to_context`).
    let model = DitConfig::tiny().with_text_len(8).init::<Ad>(&Default::default());
    let clip = clip(3, 4);
    let objective = SftObjective::new(small_config()).unwrap();
    let sft = objective.context(&model, &clip).unwrap();
    let embedding = ff_model::text::PromptEmbedding { data: clip.prompt.clone(), truncated: false, original_len: 5 };
    let generate = embedding.to_context::<Ad>(model.config().text_len, &Default::default()).unwrap().unsqueeze::<3>();
    assert_eq!(sft.dims(), [1, 8, 24]);
    assert_eq!(sft.into_data(), generate.into_data());
}

#[test]
fn a_crops_first_latent_is_its_first_frame_encoded_alone_and_sft_trains_on_it() {
    // The paper encodes the RGB crop: rebased position 0 is a causal first latent of one frame,
    // as inference produces it. Reusing the clip's latents (the earlier behaviour, `crops: None`)
    // gives the crop a first latent that summarises four frames.
    let device = Default::default();
    let vae = crate::dmd::tests::tiny_vae();
    let video = Tensor::<NdArray, 5>::random([1, 3, 45, 16, 16], Distribution::Uniform(-1.0, 1.0), &device);
    let latents = vae.normalize(vae.encode_mean(video.clone()).unwrap()).reshape([16, 12, 2, 2]).into_data();
    let crops = crate::data::encode_crops(&vae, video.clone(), 8).unwrap();
    assert_eq!(crops.shape.to_vec(), vec![4, 16, 8, 2, 2], "one crop of L − Δ latents per start latent 1..=Δ");
    let alone = |o: usize| host(vae.normalize(vae.encode_mean(video.clone().narrow(2, 4 * o, 1)).unwrap()));
    let crops_t = Tensor::<NdArray, 5>::from_data(crops.clone(), &device);
    for o in 1..=4 {
        assert_close(&host(crops_t.clone().narrow(0, o - 1, 1).narrow(2, 0, 1)), &alone(o), 1e-5);
    }

    // Phase 1 packs a crop from those latents: its position-0 frame is frame 4o encoded alone.
    let objective = SftObjective::new(small_config()).unwrap();
    let offsets = vec![1, 3];
    let layout = objective.layout(&offsets);
    let draw = Draw { start: 0, offsets, sigma: 0.5, noise: TensorData::zeros::<f32, _>([16, 12, 2, 2]) };
    let first_of = |sequence: usize, crops: Option<&TensorData>| {
        let f = layout.frames.iter().position(|f| f.sequence == sequence && f.position == 0).unwrap();
        let packed = crate::sft::pack::<NdArray>(&latents, crops, &draw, &layout, &device);
        host(packed.targets.narrow(2, f, 1).neg()) // ε = 0: the target is −x0
    };
    for (sequence, o) in [(1, 1), (2, 3)] {
        assert_close(&first_of(sequence, Some(&crops)), &alone(o), 1e-5);
        let reused = first_of(sequence, None);
        assert!(reused.iter().zip(alone(o)).any(|(a, b)| (a - b).abs() > 1e-3), "the clip's latent {o} is not its frame {} alone", 4 * o);
    }
}

fn host<const D: usize>(t: Tensor<NdArray, D>) -> Vec<f32> {
    t.into_data().to_vec::<f32>().unwrap()
}

fn assert_close(got: &[f32], want: &[f32], tolerance: f32) {
    assert_eq!(got.len(), want.len());
    let worst = got.iter().zip(want).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max);
    assert!(worst <= tolerance, "largest difference {worst}");
}

#[test]
fn block_checkpointing_gives_the_gradients_of_the_full_graph() {
    // `checkpointing = "blocks"` recomputes each block of the packed forward in the backward
    // pass with the same ops on the same values: the loss and the gradients are expected bit for
    // bit (tolerance 0), every parameter of the model included.
    use crate::engine::params::gradients;
    let full = tiny_model(4);
    let checkpointed = full.clone().with_block_checkpointing(true);
    let objective = SftObjective::new(small_config()).unwrap();
    let clip = clip(12, 6);
    let draw = objective.draw(&clip, &mut TrainRng::new(8)).unwrap();
    let bits = |map: crate::engine::params::ParamMap<NdArray>| -> Vec<(String, Vec<u32>)> {
        map.into_iter().map(|(k, v)| (k, v.into_data().to_vec::<f32>().unwrap().iter().map(|x| x.to_bits()).collect())).collect()
    };
    let a = objective.loss_of(&full, &clip, &draw).unwrap().total;
    let ga = gradients(&full, &a.backward());
    let b = objective.loss_of(&checkpointed, &clip, &draw).unwrap().total;
    assert_eq!(a.into_scalar().to_bits(), b.clone().into_scalar().to_bits());
    let gb = gradients(&full, &b.backward());
    assert!(ga.len() > 100 && ga.len() == gb.len(), "{} and {} gradients", ga.len(), gb.len());
    assert_eq!(bits(ga), bits(gb));
}
