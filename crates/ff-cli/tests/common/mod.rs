//! Helpers shared by the CLI's end-to-end tests: a model directory in the Wan2.1-Diffusers
//! layout with tiny random-weight models. DiT and VAE weights are the reference fixtures' tiny
//! random models (`ff_model::fixture::dir`); the umT5 weights are drawn here (its width must match the
//! DiT's `text_dim` of 24); the tokenizer is a word-level `tokenizer.json` shaped like umT5's.
// Each test binary uses its own subset of these helpers.
#![allow(dead_code)]

use ff_train::TrainRng;
use ff_train::data::shards::{Encoders, ShardWriter};
use ff_train::data::{ClipSource, LatentClip, ShardDataset};
use std::fs;
use std::path::{Path, PathBuf};

pub const WORDS: [&str; 12] = ["<pad>", "</s>", "<unk>", "a", "red", "fox", "runs", "in", "the", "snow", "at", "night"];
/// umT5 sizes: d_model must equal the fixture DiT's text_dim.
const D_MODEL: usize = 24;
const HEADS: usize = 3;
const D_KV: usize = 8;
const D_FF: usize = 40;
const LAYERS: usize = 2;
const BUCKETS: usize = 32;

/// The reference fixtures: `$FF_FIXTURES`, else the repository's `tests/fixtures`.
pub fn fixtures() -> PathBuf {
    ff_model::fixture::dir()
}

/// A fresh directory for one test, removed when dropped.
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("ff-cli-e2e-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

pub fn write(path: &Path, bytes: impl AsRef<[u8]>) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, bytes).unwrap();
}

/// Writes f32 tensors as a safetensors file.
pub fn write_safetensors(path: &Path, tensors: &[(String, Vec<usize>, Vec<f32>)]) {
    let mut header = serde_json::Map::new();
    let mut data = Vec::new();
    for (name, shape, values) in tensors {
        assert_eq!(shape.iter().product::<usize>(), values.len(), "{name}");
        let start = data.len();
        data.extend(values.iter().flat_map(|v| v.to_le_bytes()));
        header.insert(name.clone(), serde_json::json!({"dtype": "F32", "shape": shape, "data_offsets": [start, data.len()]}));
    }
    let mut header = serde_json::to_vec(&header).unwrap();
    header.resize(header.len().next_multiple_of(8), b' ');
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend(header);
    bytes.extend(data);
    write(path, bytes);
}

/// Deterministic values in [-scale, scale].
pub fn random(n: usize, seed: u64, scale: f32) -> Vec<f32> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            ((state >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale
        })
        .collect()
}

/// A umT5 encoder in the transformers layout (`shared.weight`, `encoder.block.N.layer...`).
pub fn write_umt5(dir: &Path) {
    let config = serde_json::json!({
        "architectures": ["UMT5EncoderModel"], "vocab_size": WORDS.len(), "d_model": D_MODEL, "d_kv": D_KV,
        "d_ff": D_FF, "num_layers": LAYERS, "num_heads": HEADS, "relative_attention_num_buckets": BUCKETS,
        "relative_attention_max_distance": 128, "feed_forward_proj": "gated-gelu", "layer_norm_epsilon": 1e-6
    });
    write(&dir.join("config.json"), config.to_string());
    let inner = HEADS * D_KV;
    let mut tensors = Vec::new();
    let mut add = |name: String, shape: Vec<usize>, scale: f32| {
        let n = shape.iter().product();
        let values = if scale == 0.0 { vec![1.0; n] } else { random(n, tensors.len() as u64 + 1, scale) };
        tensors.push((name, shape, values));
    };
    add("shared.weight".into(), vec![WORDS.len(), D_MODEL], 1.0);
    for i in 0..LAYERS {
        let attn = format!("encoder.block.{i}.layer.0.SelfAttention");
        for (w, shape) in [("q", [inner, D_MODEL]), ("k", [inner, D_MODEL]), ("v", [inner, D_MODEL]), ("o", [D_MODEL, inner])] {
            add(format!("{attn}.{w}.weight"), shape.to_vec(), 0.2);
        }
        add(format!("{attn}.relative_attention_bias.weight"), vec![BUCKETS, HEADS], 0.5);
        add(format!("encoder.block.{i}.layer.0.layer_norm.weight"), vec![D_MODEL], 0.0);
        let ffn = format!("encoder.block.{i}.layer.1.DenseReluDense");
        add(format!("{ffn}.wi_0.weight"), vec![D_FF, D_MODEL], 0.2);
        add(format!("{ffn}.wi_1.weight"), vec![D_FF, D_MODEL], 0.2);
        add(format!("{ffn}.wo.weight"), vec![D_MODEL, D_FF], 0.2);
        add(format!("encoder.block.{i}.layer.1.layer_norm.weight"), vec![D_MODEL], 0.0);
    }
    add("encoder.final_layer_norm.weight".into(), vec![D_MODEL], 0.0);
    write_safetensors(&dir.join("model.safetensors"), &tensors);
}

/// A word-level `tokenizer.json` shaped like umT5's: `<pad>` = 0, `</s>` = 1 appended.
pub fn tokenizer_json() -> String {
    let vocab: serde_json::Map<String, serde_json::Value> = WORDS.iter().enumerate().map(|(i, w)| (w.to_string(), i.into())).collect();
    let seq = |id: &str| serde_json::json!({"Sequence": {"id": id, "type_id": 0}});
    let eos = serde_json::json!({"SpecialToken": {"id": "</s>", "type_id": 0}});
    serde_json::json!({
        "version": "1.0", "truncation": null, "padding": null, "added_tokens": [], "normalizer": null,
        "pre_tokenizer": {"type": "Whitespace"},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [seq("A"), eos.clone()],
            "pair": [seq("A"), eos.clone(), seq("B"), eos],
            "special_tokens": {"</s>": {"id": "</s>", "ids": [1], "tokens": ["</s>"]}}
        },
        "decoder": null,
        "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "<unk>"}
    })
    .to_string()
}

/// Config objects of the fixture folders' `meta.json`.
pub fn fixture_config(name: &str) -> serde_json::Value {
    let meta: serde_json::Value = serde_json::from_str(&fs::read_to_string(fixtures().join(name).join("meta.json")).unwrap()).unwrap();
    meta["config"].clone()
}

/// A Wan2.1-Diffusers-style model directory.
pub fn diffusers_dir(root: &Path) {
    let dit = fixtures().join("wan_dit_tiny");
    write(&root.join("model_index.json"), r#"{"_class_name": "WanPipeline"}"#);
    write(&root.join("transformer/config.json"), fixture_config("wan_dit_tiny").to_string());
    fs::copy(dit.join("weights_diffusers.safetensors"), root.join("transformer/diffusion_pytorch_model.safetensors")).unwrap();
    write(&root.join("vae/config.json"), fixture_config("wan_vae_tiny").to_string());
    fs::copy(fixtures().join("wan_vae_tiny/weights_diffusers.safetensors"), root.join("vae/diffusion_pytorch_model.safetensors")).unwrap();
    write_umt5(&root.join("text_encoder"));
    write(&root.join("tokenizer/tokenizer.json"), tokenizer_json());
}

/// A dataset of `count` clips of random latents (`[C, L, h, w]`, no crops) and 5-token prompts
/// for videos of `size` pixels, drawn from seed 9.
pub fn write_clips(data: &Path, count: usize, latents: [usize; 4], size: [usize; 2]) {
    let encoders = Encoders { vae: "test-vae".into(), text: "test-text".into() };
    let mut writer = ShardWriter::open(data, encoders, 2).unwrap();
    let mut rng = TrainRng::new(9);
    for i in 0..count {
        let clip = LatentClip {
            latents: rng.normal_data(latents.to_vec()),
            prompt: rng.normal_data(vec![5, 24]),
            crops: None,
            caption: format!("clip {i}"),
        };
        writer.push(&format!("v{i}.mp4"), size, &clip).unwrap();
    }
    writer.finish().unwrap();
}

/// Model directory (Wan layout, fixture DiT with an 8-token context) and a 3-clip dataset of
/// 3 latents at 4×4 with 5-token prompts.
pub fn setup_sft(root: &Path) -> (PathBuf, PathBuf) {
    let model = root.join("model");
    fs::create_dir_all(&model).unwrap();
    let config = serde_json::json!({
        "_class_name": "WanModel", "model_type": "t2v", "dim": 32, "ffn_dim": 64, "freq_dim": 256, "in_dim": 16,
        "out_dim": 16, "num_heads": 2, "num_layers": 2, "text_dim": 24, "text_len": 8, "patch_size": [1, 2, 2],
        "qk_norm": true, "cross_attn_norm": true, "eps": 1e-6
    });
    fs::write(model.join("config.json"), config.to_string()).unwrap();
    fs::copy(fixtures().join("wan_dit_tiny/weights_wan.safetensors"), model.join("diffusion_pytorch_model.safetensors")).unwrap();
    let data = root.join("data");
    write_clips(&data, 3, [16, 12, 4, 4], [32, 32]);
    assert_eq!(ShardDataset::open(&data).unwrap().len(), 3);
    let toml = "[train]\nbatch = 2\nlr = 1e-3\nwarmup_steps = 1\ncheckpoint_every = 2\nlora_rank = 4\nlora_alpha = 4.0\n[sft]\nlatents = 12\nanchor_stride = 4\nplanner_block = 2\nchunk = 2\nhistory = 2\nrebased_crops = 2\n";
    fs::write(root.join("sft.toml"), toml).unwrap();
    (model, data)
}

/// The arguments of `train sft` over `setup_sft`'s data with `--model-dir root/model` into
/// `root/out`, seed 3, with its `sft.toml` unless `extra` names a `--config`.
pub fn sft_args(root: &Path, model: &str, out: &str, extra: &[&str]) -> Vec<String> {
    let (model, data, config) = (root.join(model), root.join("data"), root.join("sft.toml"));
    let mut args: Vec<String> =
        ["train", "sft", "--model-dir", model.to_str().unwrap(), "--data", data.to_str().unwrap()].iter().map(|s| s.to_string()).collect();
    args.extend(["--out".into(), root.join(out).to_str().unwrap().to_string(), "--seed".into(), "3".into()]);
    if !extra.contains(&"--config") {
        args.extend(["--config".into(), config.to_str().unwrap().to_string()]);
    }
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}
