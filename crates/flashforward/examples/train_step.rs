//! Phase 1 from code: a few packed time-rebased SFT steps of the planner and renderer roles on a
//! tiny random DiT and random latent clips (real runs read `encode-videos` shards with
//! `ff_train::data::ShardDataset` and a model folder's DiT).
//!
//! Run: `cargo run --release -p flashforward --features train --example train_step`

use burn::backend::Autodiff;
use flashforward::ff_model::{DitConfig, LoraConfig};
use flashforward::ff_train::TrainRng;
use flashforward::ff_train::data::{InMemoryClips, LatentClip};
use flashforward::ff_train::engine::{TrainConfig, Trainer};
use flashforward::ff_train::sft::{SftConfig, SftObjective};

type B = Autodiff<flashforward::Cpu>;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let device = Default::default();
    let mut rng = TrainRng::new(0);
    let clip = |i| LatentClip {
        latents: rng.normal_data(vec![16, 12, 4, 4]),
        prompt: rng.normal_data(vec![5, 24]),
        crops: None,
        caption: format!("clip {i}"),
    };
    let data = InMemoryClips((0..4).map(clip).collect());
    let sft =
        SftConfig::new().with_latents(12).with_anchor_stride(4).with_planner_block(2).with_chunk(2).with_history(2).with_rebased_crops(2);
    let objective = SftObjective::new(sft)?;
    let train = TrainConfig::new().with_lr(1e-3).with_batch(2).with_lora_rank(4).with_lora_alpha(4.0).with_seed(0);
    let model = DitConfig::tiny().init::<B>(&device).with_roles(&LoraConfig::new(4).with_alpha(4.0));
    let mut trainer = Trainer::new(train, model, vec![device], data.0.len())?;
    for _ in 0..3 {
        let report = trainer.step(&objective, &data)?;
        println!("step {}: loss {:.4}, lr {:.1e}", report.step, report.loss, report.lr);
    }
    Ok(())
}
