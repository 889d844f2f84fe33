//! Phase 2 on `NdArray` / `Autodiff<NdArray>` with tiny models: gradient routing, score windows,
//! the losses, training/inference consistency, what each update changes, and bit-exact resume.

mod consistency;
mod routing;
mod scores;
mod train;

use super::DmdConfig;
use crate::TrainRng;
use burn::backend::NdArray;
use ff_model::vae::{WanVae, WanVaeConfig};
use ff_model::{DitConfig, WanDit};

/// 12 latents, anchors {0, 4, 8, 11} in blocks of 2, chunks of 2 with H = 2, 2 stages, one
/// score window over the clip (the VAE is slow in debug builds; heads are tested on their own).
fn tiny_config() -> DmdConfig {
    DmdConfig::new()
        .with_latents(12)
        .with_stages(2)
        .with_anchor_stride(4)
        .with_planner_block(2)
        .with_chunk(2)
        .with_history(2)
        .with_planner_context(4)
        .with_score_window(12)
        .with_critic_updates(1)
        .with_critic_lora_rank(4)
        .with_critic_lora_alpha(4.0)
}

/// A random Wan VAE at the reference fixture's tiny size (16 latent channels, 4× time, 8× space),
/// its lazily initialised weights drawn once (so that the streaming decoder's copy shares them).
pub(crate) fn tiny_vae() -> WanVae<NdArray> {
    struct Draw;
    impl burn::module::ModuleVisitor<NdArray> for Draw {
        fn visit_float<const D: usize>(&mut self, param: &burn::module::Param<burn::tensor::Tensor<NdArray, D>>) {
            let _ = param.val();
        }
    }
    let vae = WanVaeConfig::new(8, 16, vec![1, 2, 4, 4], 1, vec![], vec![false, true, true], vec![0.1; 16], vec![1.5; 16])
        .init::<NdArray>(&Default::default());
    burn::module::Module::visit(&vae, &mut Draw);
    vae
}

/// `n` clips of 3 latents at 2×2 (one token per frame) with 5-token prompts.
fn clips(n: usize) -> crate::data::InMemoryClips {
    let mut rng = TrainRng::new(5);
    let clip = |i| crate::data::LatentClip {
        latents: rng.normal_data(vec![16, 3, 2, 2]),
        prompt: rng.normal_data(vec![5, 24]),
        crops: None,
        caption: format!("clip {i}"),
    };
    crate::data::InMemoryClips((0..n).map(clip).collect())
}

/// A plain tiny DiT with the engine tests' 8-token context.
fn plain_dit() -> WanDit<NdArray> {
    DitConfig::tiny().with_text_len(8).init(&Default::default())
}

/// The empty prompt's embedding (2 tokens).
fn empty_prompt() -> burn::tensor::TensorData {
    TrainRng::new(77).normal_data(vec![2, 24])
}

/// Host values of a tensor.
fn host<B: burn::tensor::backend::Backend, const D: usize>(t: burn::tensor::Tensor<B, D>) -> Vec<f32> {
    t.into_data().convert::<f32>().to_vec().unwrap()
}
