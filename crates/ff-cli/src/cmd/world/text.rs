//! `flashforward world text --out DIR [--seed S]`: the small world's text side in DIR (a model
//! directory, see [`world_dir`](crate::world_dir)): `tokenizer/tokenizer.json`, a word-level tokenizer
//! over every word the caption parser reads (`ff_world::vocab::caption_words`, punctuation
//! included, so no caption of the domain has an unknown token), and `text_encoder/`, a umT5 of
//! `Umt5Config::tiny_world` with random weights drawn from the seed.
//!
//! The encoder stays frozen: the teacher's text embedding and cross-attention learn to read its
//! features. It suffices when distinct prompts give well-separated embeddings (checked by this
//! command's test and printed here) and the teacher reaches its prompt accuracy
//! (docs/RESULTS.md).

use crate::backend::{CpuBackend, cpu_device};
use crate::world_dir::WorldDir;
use anyhow::{Context, Result};
use burn::tensor::backend::Backend;
use ff_model::io::write_atomic;
use ff_model::text::{Umt5Config, WORLD_VOCAB_SIZE, word_level_tokenizer};
use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// Punctuation a caption may hold (the parser ignores it; the tokenizer gives it ids).
const PUNCTUATION: [&str; 4] = [".", ",", "!", ";"];

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Model directory to write `tokenizer/` and `text_encoder/` into.
    #[arg(long)]
    pub out: PathBuf,
    /// Seed of the encoder's random weights.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

pub fn run(args: Args) -> Result<ExitCode> {
    write(&WorldDir(args.out.clone()), args.seed)?;
    println!("{}: tokenizer/tokenizer.json, text_encoder/ (umT5 tiny_world, seed {})", args.out.display(), args.seed);
    Ok(ExitCode::SUCCESS)
}

/// Writes the tokenizer and the seeded encoder into `dir`, each file atomically.
pub fn write(dir: &WorldDir, seed: u64) -> Result<()> {
    let mut words = ff_world::vocab::caption_words();
    words.extend(PUNCTUATION);
    let tokenizer = word_level_tokenizer(&words, WORLD_VOCAB_SIZE)?;
    let path = dir.tokenizer();
    std::fs::create_dir_all(path.parent().unwrap_or(&dir.0)).with_context(|| format!("cannot create {}", path.display()))?;
    write_atomic(&path, |w| w.write_all(tokenizer.as_bytes()))?;

    let config = Umt5Config::tiny_world();
    let device = cpu_device();
    CpuBackend::seed(&device, seed);
    let encoder = config.init::<CpuBackend>(&device);
    let text = dir.text_encoder_dir();
    std::fs::create_dir_all(&text).with_context(|| format!("cannot create {}", text.display()))?;
    let json = serde_json::json!({
        "architectures": ["UMT5EncoderModel"],
        "model_type": "umt5",
        "feed_forward_proj": "gated-gelu",
        "vocab_size": config.vocab_size,
        "d_model": config.d_model,
        "d_kv": config.d_kv,
        "d_ff": config.d_ff,
        "num_layers": config.num_layers,
        "num_heads": config.num_heads,
        "relative_attention_num_buckets": config.relative_attention_num_buckets,
        "relative_attention_max_distance": config.relative_attention_max_distance,
        "layer_norm_epsilon": config.layer_norm_epsilon,
    });
    write_atomic(&text.join("config.json"), |w| serde_json::to_writer_pretty(w, &json).map_err(Into::into))?;
    let metadata = HashMap::from([("format".to_string(), "pt".to_string())]);
    ff_train::checkpoint::write_tensors(&text.join("model.safetensors"), encoder.file_tensors()?, metadata)?;
    Ok(())
}

#[cfg(test)]
mod tests;
