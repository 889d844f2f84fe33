//! How much a trained DiT reads each kind of caption word: the flow-matching loss of clips of a
//! latent dataset at fixed σ with their own prompt, against the same loss with the prompt of a
//! clip whose caption differs in one word of one kind (motion, shape, colour). A gap near zero
//! means the model ignores that kind of word at that noise level. Noise is fixed per clip, so
//! the two losses differ only by the prompt.
//!
//! ```sh
//! cargo run --release -p ff-train --example caption_gaps -- RUN/step-NNNNNN DATA [CLIPS]
//! ```
//!
//! RUN is a `train teacher` run of the `tiny-world` preset (its checkpoint's EMA is read; the
//! depth comes from the checkpoint's state); DATA a `world latents` dataset; CLIPS (default 120)
//! the clips scored (pairs are looked up among the first 600).

use burn::backend::NdArray;
use burn::tensor::{Tensor, TensorData};
use ff_model::{FlowMatch, Role, WanDit};
use ff_train::data::{ClipSource, LatentClip, ShardDataset};
use ff_train::rng::TrainRng;
use std::collections::HashMap;
use std::path::Path;

type B = NdArray;

const KINDS: [(&str, &[&str]); 3] = [
    ("motion", &["left", "right", "up", "down", "bounces"]),
    ("shape", &["circle", "square", "triangle"]),
    ("colour", &["red", "green", "blue", "yellow", "orange", "purple", "white"]),
];

/// Index of a clip whose caption is `caption` with one word of `kind` replaced.
fn partner(caption: &str, kind: &[&str], by_caption: &HashMap<&str, usize>) -> Option<usize> {
    let words: Vec<&str> = caption.split(' ').collect();
    for (i, word) in words.iter().enumerate().filter(|(_, w)| kind.contains(w)) {
        for other in kind.iter().filter(|o| *o != word) {
            let mut swapped = words.clone();
            swapped[i] = other;
            if let Some(&j) = by_caption.get(swapped.join(" ").as_str()) {
                return Some(j);
            }
        }
    }
    None
}

/// The velocity MSE of `clip` at `sigma` under `prompt`, noise from `seed`.
fn loss(dit: &WanDit<B>, clip: &LatentClip, prompt: &TensorData, sigma: f64, seed: u64) -> f64 {
    let device = dit.device();
    let shape: Vec<usize> = clip.latents.shape.to_vec();
    let eps = Tensor::<B, 4>::from_data(TrainRng::new(seed).normal_data(shape.clone()), &device).unsqueeze::<5>();
    let x0 = Tensor::<B, 4>::from_data(clip.latents.clone(), &device).unsqueeze::<5>();
    let noisy = x0.clone() * (1.0 - sigma) + eps.clone() * sigma;
    let [tokens, dim] = prompt.shape[..] else { panic!("prompt of '{}' is not [tokens, dim]", clip.caption) };
    let padding = Tensor::<B, 2>::zeros([dit.config().text_len - tokens, dim], &device);
    let text = dit.text_context(Tensor::cat(vec![Tensor::from_data(prompt.clone(), &device), padding], 0).unsqueeze());
    let timesteps = vec![vec![FlowMatch::default().timestep(sigma); shape[1]]];
    let prediction = dit.forward(noisy, &timesteps, &text, Role::Base).expect("forward");
    (prediction - (eps - x0)).square().mean().into_scalar() as f64
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, run, data, rest @ ..] = &args[..] else { panic!("usage: caption_gaps RUN/step-NNNNNN DATA [CLIPS]") };
    let scored: usize = rest.first().map_or(120, |n| n.parse().expect("CLIPS must be a number"));
    let device = Default::default();
    let state: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(Path::new(run).join("state.json")).expect("state.json")).expect("state.json");
    let dit_config = serde_json::from_value(state["dit"].clone()).expect("state.json holds the DiT config");
    let dit = ff_train::checkpoint::load_dit::<B>(&dit_config, Path::new(run), &device).expect("checkpoint");
    let data = ShardDataset::open(Path::new(data)).expect("dataset");
    let clips: Vec<LatentClip> = (0..data.len().min(600)).map(|i| data.get(i).expect("clip")).collect();
    let by_caption: HashMap<&str, usize> = clips.iter().enumerate().map(|(i, c)| (c.caption.as_str(), i)).collect();
    println!("| σ | kind | pairs | own prompt | swapped word | gap |\n| ---: | --- | ---: | ---: | ---: | ---: |");
    for sigma in [0.9, 0.7, 0.4] {
        for (name, kind) in KINDS {
            let (mut own, mut swapped, mut pairs) = (0.0, 0.0, 0);
            for (i, clip) in clips.iter().enumerate().take(scored) {
                let Some(j) = partner(&clip.caption, kind, &by_caption) else { continue };
                own += loss(&dit, clip, &clip.prompt, sigma, i as u64);
                swapped += loss(&dit, clip, &clips[j].prompt, sigma, i as u64);
                pairs += 1;
            }
            let n = pairs.max(1) as f64;
            println!("| {sigma} | {name} | {pairs} | {:.4} | {:.4} | {:+.4} |", own / n, swapped / n, (swapped - own) / n);
        }
    }
}
