//! Tests of the encoder against the transformers fixtures (`umt5_*` under
//! [`crate::fixture::dir`]), the Wan checkpoint layout, and prompt encoding with the cache.

use crate::fixture::{self, rel_l2, verify_fixture};

/// Relative L2 error the encoder must reach against a fixture.
const PARITY_TOLERANCE: f64 = 1e-4;

fn relative_l2(a: &burn::tensor::TensorData, b: &burn::tensor::TensorData) -> f64 {
    rel_l2(a, b).unwrap()
}
use super::tokenizer::tests::write_test_tokenizer;
use super::*;
use crate::load::read_tensors;
use burn::backend::NdArray;
use burn::tensor::{Int, Tensor, TensorData};
use safetensors::{Dtype, tensor::TensorView};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

type B = NdArray;

fn tiny() -> PathBuf {
    fixture::dir().join("umt5_tiny")
}

fn tiny_config() -> Umt5Config {
    Umt5Config::from_json(&tiny().join("meta.json")).unwrap()
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ff-umt5-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The fixture inputs as `(ids, mask)` tensors.
fn tiny_inputs() -> (Tensor<B, 2, Int>, Tensor<B, 2, Int>) {
    let inputs = read_tensors(&tiny().join("inputs.safetensors")).unwrap();
    let device = Default::default();
    (Tensor::from_data(inputs["input_ids"].clone(), &device), Tensor::from_data(inputs["attention_mask"].clone(), &device))
}

fn run(weights: &Path) -> TensorData {
    let encoder = Umt5Encoder::<B>::load(weights, &tiny_config(), &Default::default()).unwrap();
    let (ids, mask) = tiny_inputs();
    encoder.forward(ids, mask).unwrap().into_data()
}

/// The name Wan2.1's `T5Encoder` gives a transformers `UMT5EncoderModel` key (`None`: the tied
/// `encoder.embed_tokens.weight`, absent from Wan checkpoints).
fn wan_name(key: &str) -> Option<String> {
    const BLOCK: [(&str, &str); 10] = [
        ("layer.0.SelfAttention.q.weight", "attn.q.weight"),
        ("layer.0.SelfAttention.k.weight", "attn.k.weight"),
        ("layer.0.SelfAttention.v.weight", "attn.v.weight"),
        ("layer.0.SelfAttention.o.weight", "attn.o.weight"),
        ("layer.0.SelfAttention.relative_attention_bias.weight", "pos_embedding.embedding.weight"),
        ("layer.0.layer_norm.weight", "norm1.weight"),
        ("layer.1.layer_norm.weight", "norm2.weight"),
        ("layer.1.DenseReluDense.wi_0.weight", "ffn.gate.0.weight"),
        ("layer.1.DenseReluDense.wi_1.weight", "ffn.fc1.weight"),
        ("layer.1.DenseReluDense.wo.weight", "ffn.fc2.weight"),
    ];
    match key {
        "shared.weight" => Some("token_embedding.weight".into()),
        "encoder.embed_tokens.weight" => None,
        "encoder.final_layer_norm.weight" => Some("norm.weight".into()),
        _ => {
            let (n, rest) = key.strip_prefix("encoder.block.")?.split_once('.')?;
            let (_, wan) = BLOCK.iter().find(|(hf, _)| *hf == rest)?;
            Some(format!("blocks.{n}.{wan}"))
        }
    }
}

/// Writes `tensors` (f32 data) to a safetensors file as F32 or BF16.
fn write_safetensors(path: &Path, tensors: &BTreeMap<String, TensorData>, dtype: Dtype) {
    let bytes: Vec<(String, Vec<usize>, Vec<u8>)> = tensors
        .iter()
        .map(|(k, t)| {
            let v = t.to_vec::<f32>().unwrap();
            let b = match dtype {
                Dtype::BF16 => v.iter().flat_map(|x| half::bf16::from_f32(*x).to_le_bytes()).collect(),
                _ => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            };
            (k.clone(), t.shape.to_vec(), b)
        })
        .collect();
    let views = bytes.iter().map(|(k, s, b)| (k.clone(), TensorView::new(dtype, s.clone(), b).unwrap()));
    safetensors::serialize_to_file(views, None, path).unwrap();
}

fn fixture_weights() -> BTreeMap<String, TensorData> {
    read_tensors(&tiny().join("weights_transformers.safetensors")).unwrap()
}

#[test]
fn matches_transformers_on_every_umt5_fixture() {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(fixture::dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("umt5_"))
        .collect();
    dirs.sort();
    assert!(dirs.contains(&tiny()), "umt5_tiny fixture missing under {}", fixture::dir().display());
    for dir in dirs {
        let results = verify_fixture::<B>(&dir, &Default::default()).unwrap();
        assert!(!results.is_empty());
        for c in results {
            assert!(c.max_rel_err <= PARITY_TOLERANCE, "{}/{}: relative L2 {:e}", dir.display(), c.weights, c.max_rel_err);
        }
    }
}

#[test]
fn wan_layout_f32_gives_identical_output() {
    let wan: BTreeMap<String, TensorData> = fixture_weights().into_iter().filter_map(|(k, t)| wan_name(&k).map(|w| (w, t))).collect();
    assert!(wan.contains_key("blocks.1.ffn.gate.0.weight") && wan.contains_key("token_embedding.weight"));
    let path = temp_dir("wan-f32").join("umt5-enc.safetensors");
    write_safetensors(&path, &wan, Dtype::F32);
    let reference = run(&tiny().join("weights_transformers.safetensors"));
    assert_eq!(run(&path), reference);
}

#[test]
fn wan_layout_bf16_is_cast_on_load() {
    // Same weights rounded to bf16: once as a bf16 Wan checkpoint, once as an f32 transformers
    // file without the tied duplicate. Both must give the same output.
    let rounded: BTreeMap<String, TensorData> = fixture_weights()
        .into_iter()
        .filter(|(k, _)| k != "encoder.embed_tokens.weight")
        .map(|(k, t)| {
            let v: Vec<f32> = t.to_vec::<f32>().unwrap().iter().map(|x| half::bf16::from_f32(*x).to_f32()).collect();
            (k, TensorData::new(v, t.shape.clone()))
        })
        .collect();
    let dir = temp_dir("wan-bf16");
    let hf = dir.join("hf-rounded.safetensors");
    write_safetensors(&hf, &rounded, Dtype::F32);
    let wan_path = dir.join("wan-bf16.safetensors");
    let wan = rounded.iter().map(|(k, t)| (wan_name(k).unwrap(), t.clone())).collect();
    write_safetensors(&wan_path, &wan, Dtype::BF16);
    let out = run(&wan_path);
    assert_eq!(out, run(&hf));
    let expected = read_tensors(&tiny().join("expected.safetensors")).unwrap().remove("last_hidden_state").unwrap();
    let err = relative_l2(&out, &expected);
    assert!(err > PARITY_TOLERANCE && err < 0.05, "bf16 weights should be close to, not equal to, f32: {err:e}");
}

#[test]
fn wrong_config_is_a_shape_error_naming_the_key() {
    let config = Umt5Config { d_ff: 65, ..tiny_config() };
    let err =
        Umt5Encoder::<B>::load(tiny().join("weights_transformers.safetensors"), &config, &Default::default()).unwrap_err().to_string();
    assert!(err.contains("weights_transformers.safetensors") && err.contains("DenseReluDense"), "{err}");
}

#[test]
fn mismatched_mask_and_out_of_vocabulary_ids_are_errors() {
    let encoder = Umt5Encoder::<B>::load(tiny().join("weights_transformers.safetensors"), &tiny_config(), &Default::default()).unwrap();
    let (ids, mask) = tiny_inputs();
    let [b, l] = ids.dims();
    let short = mask.clone().narrow(1, 0, l - 1);
    let err = encoder.forward(ids.clone(), short).unwrap_err().to_string();
    assert!(err.contains(&format!("[{b}, {l}]")) && err.contains(&format!("[{b}, {}]", l - 1)), "{err}");
    let vocab = tiny_config().vocab_size as i64;
    for bad in [vocab, -1] {
        let ids = ids.clone().slice_fill([0..1, 0..1], bad);
        let err = encoder.forward(ids, mask.clone()).unwrap_err().to_string();
        assert!(err.contains(&format!("token id {bad}")) && err.contains(&format!("vocabulary of {vocab}")), "{err}");
    }
}

#[test]
fn zero_padding_zeroes_only_padding_positions() {
    let encoder = Umt5Encoder::<B>::load(tiny().join("weights_transformers.safetensors"), &tiny_config(), &Default::default()).unwrap();
    let (ids, mask) = tiny_inputs();
    let hidden = encoder.forward(ids, mask.clone()).unwrap();
    let [b, l, d] = hidden.dims();
    let zeroed = zero_padding(hidden.clone(), mask.clone()).into_data().to_vec::<f32>().unwrap();
    let hidden = hidden.into_data().to_vec::<f32>().unwrap();
    let mask = mask.into_data().convert::<i64>().to_vec::<i64>().unwrap();
    assert!(mask.contains(&0), "fixture has padding");
    for (i, m) in mask.iter().enumerate() {
        let row = i * d..(i + 1) * d;
        if *m == 0 {
            assert!(zeroed[row.clone()].iter().all(|x| *x == 0.0) && hidden[row].iter().any(|x| *x != 0.0));
        } else {
            assert_eq!(zeroed[row.clone()], hidden[row]);
        }
    }
    assert_eq!(mask.len(), b * l);
}

#[test]
fn prompt_encoder_matches_full_padding_and_uses_the_cache() {
    let device = Default::default();
    let tokenizer_path = write_test_tokenizer("prompt-encoder");
    let files = PromptEncoderFiles {
        tokenizer: tokenizer_path.clone(),
        weights: tiny().join("weights_transformers.safetensors"),
        config: tiny_config(),
        max_len: 16,
    };
    let cache_path = temp_dir("prompt-cache").join("prompts.safetensors");
    let _ = std::fs::remove_file(&cache_path);
    let mut cache = PromptCache::open(&cache_path).unwrap();
    let prompts = ["a red cat sits on the mat", "the cat"];
    let embedded = files.embed::<B>(&prompts, Some(&mut cache), &device).unwrap();
    assert_eq!(cache.len(), 2);

    // Reference: the encoder on the full 16-token padding, valid rows of each prompt.
    let tokenizer = PromptTokenizer::from_file(&tokenizer_path).unwrap().with_max_len(16).unwrap();
    let encoder = Umt5Encoder::<B>::load(&files.weights, &files.config, &device).unwrap();
    for (prompt, emb) in prompts.iter().zip(&embedded) {
        let tokens = tokenizer.encode(prompt).unwrap();
        let (ids, mask) = Tokens::to_tensors::<B>(std::slice::from_ref(&tokens), &device).unwrap();
        let n = tokens.valid_len();
        let full = encoder.forward(ids, mask).unwrap().slice([0..1, 0..n, 0..files.config.d_model]).reshape([n, files.config.d_model]);
        assert_eq!(emb.data.shape.to_vec(), vec![n, files.config.d_model]);
        assert!(relative_l2(&emb.data, &full.into_data()) < 1e-6, "{prompt}");
        assert!(!emb.truncated && emb.original_len == n);
        let context = emb.to_context::<B>(16, &device).unwrap().into_data().to_vec::<f32>().unwrap();
        assert!(context[n * files.config.d_model..].iter().all(|x| *x == 0.0));
        assert_eq!(context[..n * files.config.d_model], emb.data.to_vec::<f32>().unwrap()[..]);
    }

    // A cache hit must not load the encoder: point the tokenizer at a missing file.
    let no_tokenizer = PromptEncoderFiles { tokenizer: "/nonexistent/tokenizer.json".into(), ..files.clone() };
    let mut reopened = PromptCache::open(&cache_path).unwrap();
    let again = no_tokenizer.embed::<B>(&prompts, Some(&mut reopened), &device).unwrap();
    assert_eq!(again, embedded);
    let miss = no_tokenizer.embed::<B>(&["a mat"], Some(&mut reopened), &device).unwrap_err().to_string();
    assert!(miss.contains("/nonexistent/tokenizer.json"), "{miss}");
}
