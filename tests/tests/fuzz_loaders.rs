//! Fuzzing the loaders with mutants of real files: the fixture safetensors (DiT and umT5
//! weights), a Self-Forcing-style `.pt` made from the DiT fixture, a `tokenizer.json` shaped like
//! umT5's (Unigram, Metaspace, `</s>` appended), a prompt cache and the fixtures' `config.json`
//! objects. Each
//! mutant is loaded the way `generate` loads it; the result must be `Ok` or `Err`, never a panic.
//!
//! Fixed seed and a bounded number of cases (`FF_FUZZ_CASES`, default 5,000), so CI runs the same
//! cases every time; a panicking mutant is saved under the temp directory and named in the
//! failure. Mutations: bit flips, interesting bytes and u64s, truncation, insertions, deletions,
//! and on JSON (safetensors headers, tokenizer, configs) replacing or deleting a random node.

use burn::backend::NdArray;
use burn::tensor::TensorData;
use ff_model::dit::DitConfig;
use ff_model::load::read_tensors;
use ff_model::text::{PromptCache, PromptEmbedding, PromptEncoder, PromptTokenizer, Umt5Config, Umt5Encoder};
use ff_model::vae::WanVaeConfig;
use ff_rng::Rng;
use ff_tests::fixtures_dir;
use ff_tests::torch::{pt_entries, zip_bytes};
use serde_json::Value;
use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

type B = NdArray;

const SEED: u64 = 0x5eed_f1a5_4f0a_2026;
const DEFAULT_CASES: usize = 5000;

const BYTES: [u8; 10] = [0, 0xff, 0x7f, 0x80, b'9', b'-', b'"', b'{', b']', b'.'];
const WORDS: [u64; 8] = [0, 1, u64::MAX, 1 << 63, 1 << 32, u32::MAX as u64, 1 << 40, 0x7fff_ffff_ffff_ffff];

/// 1–4 byte-level mutations, positions drawn from `focus` (e.g. a file's header) 3 times in 4.
fn mutate_bytes(rng: &mut Rng, bytes: &mut Vec<u8>, focus: usize) {
    for _ in 0..1 + rng.below(4) {
        let len = bytes.len().max(1);
        let pos = if rng.below(4) < 3 { rng.below(focus.min(len).max(1)) } else { rng.below(len.max(1)) };
        match rng.below(6) {
            0 if !bytes.is_empty() => {
                let at = pos.min(bytes.len() - 1);
                bytes[at] ^= 1 << rng.below(8);
            }
            1 if !bytes.is_empty() => {
                let at = pos.min(bytes.len() - 1);
                bytes[at] = *rng.pick(&BYTES);
            }
            2 => bytes.truncate(pos),
            3 => {
                let insert: Vec<u8> = (0..1 + rng.below(16)).map(|_| rng.next_u64() as u8).collect();
                let at = pos.min(bytes.len());
                bytes.splice(at..at, insert);
            }
            4 => {
                let at = pos.min(bytes.len());
                let end = (at + 1 + rng.below(64)).min(bytes.len());
                bytes.drain(at..end);
            }
            _ => {
                let word = rng.pick(&WORDS).to_le_bytes();
                let at = pos.min(bytes.len());
                let end = (at + 8).min(bytes.len());
                bytes.splice(at..end, word);
            }
        }
    }
}

/// Replaces or deletes one random node of `json` (1–3 times).
fn mutate_json(rng: &mut Rng, json: &mut Value) {
    for _ in 0..1 + rng.below(3) {
        let mut pointers = Vec::new();
        collect_pointers(json, String::new(), &mut pointers);
        let pointer = rng.pick(&pointers).clone();
        let replacements = [
            serde_json::json!(-1),
            serde_json::json!(0),
            serde_json::json!(1),
            serde_json::json!(3),
            serde_json::json!(u32::MAX),
            serde_json::json!(u64::MAX),
            serde_json::json!(1u64 << 62),
            serde_json::json!(1e308),
            serde_json::json!(-0.5),
            serde_json::json!(""),
            serde_json::json!("F32"),
            serde_json::json!(null),
            serde_json::json!(true),
            serde_json::json!([]),
            serde_json::json!({}),
            serde_json::json!([u64::MAX, u64::MAX]),
            serde_json::json!([0u64, 1u64 << 40]),
        ];
        let delete = rng.below(5) == 0;
        let (parent, last) = pointer.rsplit_once('/').unwrap_or(("", ""));
        match (delete, json.pointer_mut(parent)) {
            (true, Some(Value::Object(map))) => {
                map.remove(&last.replace("~1", "/").replace("~0", "~"));
            }
            (true, Some(Value::Array(items))) if !items.is_empty() => {
                let i = last.parse::<usize>().unwrap_or(0).min(items.len() - 1);
                items.remove(i);
            }
            _ => {
                if let Some(node) = json.pointer_mut(&pointer) {
                    *node = rng.pick(&replacements).clone();
                }
            }
        }
    }
}

fn collect_pointers(json: &Value, at: String, out: &mut Vec<String>) {
    out.push(at.clone());
    match json {
        Value::Object(map) => {
            for (k, v) in map {
                collect_pointers(v, format!("{at}/{}", k.replace('~', "~0").replace('/', "~1")), out);
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                collect_pointers(v, format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

/// A safetensors file split into its header JSON and its data bytes.
fn split_safetensors(bytes: &[u8]) -> (Value, Vec<u8>) {
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    (serde_json::from_slice(&bytes[8..8 + n]).unwrap(), bytes[8 + n..].to_vec())
}

fn join_safetensors(header: &Value, data: &[u8]) -> Vec<u8> {
    let header = header.to_string().into_bytes();
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend(header);
    out.extend(data);
    out
}

/// A `tokenizer.json` shaped like google/umt5-xxl's: Unigram model, Metaspace pre-tokenizer,
/// `</s>` appended by the post-processor, `<pad>` = 0.
fn tokenizer_json() -> Value {
    let pieces = ["<pad>", "</s>", "<unk>", "▁a", "▁red", "▁cat", "▁sits", "▁on", "▁the", "▁mat", "▁", "a", "t", "s"];
    let vocab: Vec<Value> = pieces.iter().enumerate().map(|(i, p)| serde_json::json!([p, -(i as f64) / 2.0])).collect();
    let seq = |id: &str| serde_json::json!({"Sequence": {"id": id, "type_id": 0}});
    let eos = serde_json::json!({"SpecialToken": {"id": "</s>", "type_id": 0}});
    serde_json::json!({
        "version": "1.0", "truncation": null, "padding": null,
        "added_tokens": [
            {"id": 0, "content": "<pad>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
            {"id": 1, "content": "</s>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true}
        ],
        "normalizer": {"type": "Replace", "pattern": {"String": "  "}, "content": " "},
        "pre_tokenizer": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": true},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [seq("A"), eos.clone()],
            "pair": [seq("A"), eos.clone(), seq("B"), eos],
            "special_tokens": {"</s>": {"id": "</s>", "ids": [1], "tokens": ["</s>"]}}
        },
        "decoder": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": true},
        "model": {"type": "Unigram", "unk_id": 2, "vocab": vocab, "byte_fallback": false}
    })
}

/// Makes a mutant of a file's bytes.
type Mutate = Box<dyn Fn(&mut Rng, &[u8]) -> Vec<u8>>;
/// Loads a file as `generate` would: `Err` with the message, or `Ok`.
type Load = Box<dyn Fn(&Path) -> Result<(), String>>;

/// One kind of file, its unmutated bytes, how to mutate it and how to load it.
struct Target {
    name: &'static str,
    file_name: &'static str,
    base: Vec<u8>,
    mutate: Mutate,
    load: Load,
}

fn bytes_mutant(rng: &mut Rng, base: &[u8]) -> Vec<u8> {
    let mut bytes = base.to_vec();
    // focus on the first KiB: headers, the zip's first entries, JSON structure
    mutate_bytes(rng, &mut bytes, 1024);
    bytes
}

fn safetensors_mutant(rng: &mut Rng, base: &[u8]) -> Vec<u8> {
    if rng.below(2) == 0 {
        return bytes_mutant(rng, base);
    }
    let (mut header, data) = split_safetensors(base);
    mutate_json(rng, &mut header);
    join_safetensors(&header, &data)
}

fn json_mutant(rng: &mut Rng, base: &[u8]) -> Vec<u8> {
    if rng.below(3) == 0 {
        let mut bytes = base.to_vec();
        mutate_bytes(rng, &mut bytes, base.len());
        return bytes;
    }
    let mut json: Value = serde_json::from_slice(base).unwrap();
    mutate_json(rng, &mut json);
    json.to_string().into_bytes()
}

/// A `.pt` mutant: the zip's bytes, or the pickle inside a well-formed zip (so the CRC passes
/// and the pickle parser sees the damage).
fn pt_mutant(entries: Vec<(String, Vec<u8>)>) -> impl Fn(&mut Rng, &[u8]) -> Vec<u8> {
    move |rng, base| {
        if rng.below(2) == 0 {
            return bytes_mutant(rng, base);
        }
        let mut entries = entries.clone();
        mutate_bytes(rng, &mut entries[0].1, usize::MAX);
        zip_bytes(&entries)
    }
}

fn dit_state() -> BTreeMap<String, TensorData> {
    let weights = read_tensors(&fixtures_dir().join("wan_dit_tiny/weights_wan.safetensors")).unwrap();
    weights.into_iter().map(|(k, v)| (format!("model.{k}"), v)).collect()
}

/// A `--prompt-cache` file holding two embeddings.
fn prompt_cache() -> Vec<u8> {
    let path = std::env::temp_dir().join(format!("ff-fuzz-{}-cache.safetensors", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let mut cache = PromptCache::open(&path).unwrap();
    for (i, prompt) in ["a red cat", "the mat"].into_iter().enumerate() {
        let data = TensorData::new((0..3 * 8).map(|v| (v + i) as f32 / 10.0).collect::<Vec<f32>>(), [3, 8]);
        cache.insert(prompt, "umt5:fuzz", PromptEmbedding { data, truncated: false, original_len: 3 }).unwrap();
    }
    cache.save().unwrap();
    let bytes = std::fs::read(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    bytes
}

fn meta_config(folder: &str) -> Vec<u8> {
    let meta: Value = serde_json::from_slice(&std::fs::read(fixtures_dir().join(folder).join("meta.json")).unwrap()).unwrap();
    meta["config"].to_string().into_bytes()
}

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

fn targets() -> Vec<Target> {
    let fixtures = fixtures_dir();
    let dit_config = DitConfig::from_json(fixtures.join("wan_dit_tiny/meta.json")).unwrap();
    let umt5_config = Umt5Config::from_json(&fixtures.join("umt5_tiny/meta.json")).unwrap();
    let entries = pt_entries(&[("generator_ema", &dit_state())]);
    let pt = zip_bytes(&entries);
    let device = Default::default();
    let encoder = Umt5Encoder::<B>::load(fixtures.join("umt5_tiny/weights_transformers.safetensors"), &umt5_config, &device).unwrap();
    // One model, cloned per case: `load_weights` is what `WanDit::load` runs after building it.
    let model = dit_config.init::<B>(&device);
    let dit = move || {
        let model = model.clone();
        move |p: &Path| model.clone().load_weights(p).map_err(err)
    };
    vec![
        Target {
            name: "DiT safetensors",
            file_name: "dit.safetensors",
            base: std::fs::read(fixtures.join("wan_dit_tiny/weights_wan.safetensors")).unwrap(),
            mutate: Box::new(safetensors_mutant),
            load: Box::new(dit()),
        },
        Target {
            name: "umT5 safetensors",
            file_name: "umt5.safetensors",
            base: std::fs::read(fixtures.join("umt5_tiny/weights_transformers.safetensors")).unwrap(),
            mutate: Box::new(safetensors_mutant),
            load: Box::new(move |p: &Path| Umt5Encoder::<B>::load(p, &umt5_config, &Default::default()).map(drop).map_err(err)),
        },
        Target { name: "DiT .pt", file_name: "dit.pt", base: pt, mutate: Box::new(pt_mutant(entries)), load: Box::new(dit()) },
        Target {
            name: "tokenizer.json",
            file_name: "tokenizer.json",
            base: tokenizer_json().to_string().into_bytes(),
            mutate: Box::new(json_mutant),
            load: Box::new(move |p: &Path| {
                let tokenizer = PromptTokenizer::from_file(p).and_then(|t| t.with_max_len(16)).map_err(err)?;
                let encoder = PromptEncoder::new(tokenizer, encoder.clone(), "fuzz", Default::default());
                encoder.encode(&["a red cat  sits on the mat", "at"]).map(drop).map_err(err)
            }),
        },
        Target {
            name: "prompt cache",
            file_name: "prompts.safetensors",
            base: prompt_cache(),
            mutate: Box::new(safetensors_mutant),
            load: Box::new(|p: &Path| PromptCache::open(p).map(drop).map_err(err)),
        },
        Target {
            name: "DiT config.json",
            file_name: "dit_config.json",
            base: meta_config("wan_dit_tiny"),
            mutate: Box::new(json_mutant),
            load: Box::new(|p: &Path| DitConfig::from_json(p).map(drop).map_err(err)),
        },
        Target {
            name: "umT5 config.json",
            file_name: "umt5_config.json",
            base: meta_config("umt5_tiny"),
            mutate: Box::new(json_mutant),
            load: Box::new(|p: &Path| Umt5Config::from_json(p).map(drop).map_err(err)),
        },
        Target {
            name: "VAE config.json",
            file_name: "vae_config.json",
            base: meta_config("wan_vae_tiny"),
            mutate: Box::new(json_mutant),
            load: Box::new(|p: &Path| WanVaeConfig::from_json(p).map(drop).map_err(err)),
        },
    ]
}

fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    payload.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| payload.downcast_ref::<String>().cloned()).unwrap_or_default()
}

#[test]
fn mutated_model_files_load_or_fail_without_panicking() {
    let cases: usize = std::env::var("FF_FUZZ_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(DEFAULT_CASES);
    let dir: PathBuf = std::env::temp_dir().join(format!("ff-fuzz-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let targets = targets();
    for t in &targets {
        let path = dir.join(t.file_name);
        std::fs::write(&path, &t.base).unwrap();
        assert_eq!((t.load)(&path), Ok(()), "{}: the unmutated file must load", t.name);
    }
    let mut rng = Rng::new(SEED);
    let (mut panics, mut errors, mut seconds) = (Vec::new(), vec![0usize; targets.len()], vec![0f64; targets.len()]);
    for case in 0..cases {
        let (i, t) = (case % targets.len(), &targets[case % targets.len()]);
        let mutant = (t.mutate)(&mut rng, &t.base);
        let path = dir.join(t.file_name);
        std::fs::write(&path, &mutant).unwrap();
        let start = std::time::Instant::now();
        let result = catch_unwind(AssertUnwindSafe(|| (t.load)(&path)));
        seconds[i] += start.elapsed().as_secs_f64();
        match result {
            Ok(Ok(())) => {}
            Ok(Err(_)) => errors[i] += 1,
            Err(payload) => {
                let saved = dir.join(format!("panic-{case}-{}", t.file_name));
                std::fs::write(&saved, &mutant).unwrap();
                panics.push(format!("case {case} ({}): {} [mutant: {}]", t.name, panic_message(payload), saved.display()));
            }
        }
    }
    for ((t, n), secs) in targets.iter().zip(&errors).zip(&seconds) {
        eprintln!("{}: {n} of ~{} mutants rejected, {secs:.2} s loading", t.name, cases / targets.len());
    }
    assert!(panics.is_empty(), "{} of {cases} mutants panicked:\n{}", panics.len(), panics.join("\n"));
    // The mutations must reach the error paths of every loader, or the test proves little.
    for (t, n) in targets.iter().zip(&errors) {
        assert!(*n > 0, "{}: no mutant was rejected", t.name);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
