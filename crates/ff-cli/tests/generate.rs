//! `flashforward generate` end to end on the CPU, with tiny random-weight models written in the
//! real file layouts: the DiT in the original Wan layout (`diffusion_pytorch_model.safetensors`
//! with Wan key names + `config.json`) and in the diffusers layout (`transformer/`), the Wan VAE
//! (diffusers `vae/`), a transformers umT5 encoder (`text_encoder/`) and a word-level
//! `tokenizer.json` shaped like umT5's. DiT and VAE weights are the reference fixtures' tiny
//! random models (`FF_FIXTURES`); the umT5 weights are drawn here (its width must match the
//! DiT's `text_dim` of 24). Frames are 16×16 px = 2×2 latents = 1 token per latent frame.

use std::fs::{self, File};
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use image::AnimationDecoder;
use image::codecs::gif::GifDecoder;

const WORDS: [&str; 12] = ["<pad>", "</s>", "<unk>", "a", "red", "fox", "runs", "in", "the", "snow", "at", "night"];
/// umT5 sizes: d_model must equal the fixture DiT's text_dim.
const D_MODEL: usize = 24;
const HEADS: usize = 3;
const D_KV: usize = 8;
const D_FF: usize = 40;
const LAYERS: usize = 2;
const BUCKETS: usize = 32;

fn fixtures() -> PathBuf {
    std::env::var_os("FF_FIXTURES")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures"))
}

/// A fresh directory for one test, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("ff-generate-e2e-{}-{name}", std::process::id()));
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

fn write(path: &Path, bytes: impl AsRef<[u8]>) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, bytes).unwrap();
}

/// Writes f32 tensors as a safetensors file.
fn write_safetensors(path: &Path, tensors: &[(String, Vec<usize>, Vec<f32>)]) {
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
fn random(n: usize, seed: u64, scale: f32) -> Vec<f32> {
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
fn write_umt5(dir: &Path) {
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
fn tokenizer_json() -> String {
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
fn fixture_config(name: &str) -> serde_json::Value {
    let meta: serde_json::Value = serde_json::from_str(&fs::read_to_string(fixtures().join(name).join("meta.json")).unwrap()).unwrap();
    meta["config"].clone()
}

/// A Wan2.1-Diffusers-style model directory.
fn diffusers_dir(root: &Path) {
    let dit = fixtures().join("wan_dit_tiny");
    write(&root.join("model_index.json"), r#"{"_class_name": "WanPipeline"}"#);
    write(&root.join("transformer/config.json"), fixture_config("wan_dit_tiny").to_string());
    fs::copy(dit.join("weights_diffusers.safetensors"), root.join("transformer/diffusion_pytorch_model.safetensors")).unwrap();
    write(&root.join("vae/config.json"), fixture_config("wan_vae_tiny").to_string());
    fs::copy(fixtures().join("wan_vae_tiny/weights_diffusers.safetensors"), root.join("vae/diffusion_pytorch_model.safetensors")).unwrap();
    write_umt5(&root.join("text_encoder"));
    write(&root.join("tokenizer/tokenizer.json"), tokenizer_json());
}

/// A Wan2.1-original-style directory holding the DiT (Wan keys, Wan config names) and the
/// tokenizer; VAE and encoder come by flag from `diffusers` (tiny ones have no presets).
fn wan_dir(root: &Path) {
    let config = serde_json::json!({
        "_class_name": "WanModel", "model_type": "t2v", "dim": 32, "ffn_dim": 64, "freq_dim": 256, "in_dim": 16,
        "out_dim": 16, "num_heads": 2, "num_layers": 2, "text_dim": 24, "text_len": 512, "patch_size": [1, 2, 2],
        "qk_norm": true, "cross_attn_norm": true, "eps": 1e-6, "window_size": [-1, -1]
    });
    write(&root.join("config.json"), config.to_string());
    fs::copy(fixtures().join("wan_dit_tiny/weights_wan.safetensors"), root.join("diffusion_pytorch_model.safetensors")).unwrap();
    write(&root.join("google/umt5-xxl/tokenizer.json"), tokenizer_json());
}

struct Models {
    _scratch: Scratch,
    diffusers: PathBuf,
    wan: PathBuf,
    out: PathBuf,
}

fn models(name: &str) -> Models {
    let scratch = Scratch::new(name);
    let (diffusers, wan, out) = (scratch.0.join("diffusers"), scratch.0.join("wan"), scratch.0.join("out"));
    diffusers_dir(&diffusers);
    wan_dir(&wan);
    Models { _scratch: scratch, diffusers, wan, out }
}

impl Models {
    /// `generate` over the Wan-layout directory (VAE and encoder by flag) plus `extra` args.
    fn wan_args(&self, out: &str, extra: &[&str]) -> Vec<String> {
        let d = &self.diffusers;
        let mut args: Vec<String> = [
            "--model-dir",
            self.wan.to_str().unwrap(),
            "--vae",
            d.join("vae/diffusion_pytorch_model.safetensors").to_str().unwrap(),
            "--vae-config",
            d.join("vae/config.json").to_str().unwrap(),
            "--text-encoder",
            d.join("text_encoder/model.safetensors").to_str().unwrap(),
            "--text-encoder-config",
            d.join("text_encoder/config.json").to_str().unwrap(),
        ]
        .map(String::from)
        .to_vec();
        args.extend(["--out".into(), self.out.join(out).to_str().unwrap().into()]);
        args.extend(extra.iter().map(|s| s.to_string()));
        args
    }
}

const PROMPT: &str = "a red fox runs in the snow at night";

fn generate(args: &[String]) -> Output {
    let mut all = vec!["generate"];
    for (flag, value) in [("--prompt", PROMPT), ("--height", "16"), ("--width", "16")] {
        if !args.iter().any(|a| a == flag) {
            all.extend([flag, value]);
        }
    }
    all.extend(args.iter().map(String::as_str));
    let out = Command::new(env!("CARGO_BIN_EXE_flashforward")).args(&all).output().unwrap();
    eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    out
}

fn succeeds(args: &[String]) -> String {
    let out = generate(args);
    assert!(out.status.success(), "generate {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn fails(args: &[String]) -> String {
    let out = generate(args);
    assert!(!out.status.success(), "generate {args:?} should fail");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// The PNG frames of a frame directory, in order.
fn png_frames(dir: &Path) -> Vec<Vec<u8>> {
    let mut names: Vec<PathBuf> = fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    names.sort();
    names.iter().map(|p| image::open(p).unwrap().to_rgb8().into_raw()).collect()
}

#[test]
fn generates_mp4_gif_and_frames_deterministically() {
    let m = models("videos");
    // Diffusers layout, MP4: 7 latents -> 25 frames.
    let d = m.diffusers.to_str().unwrap();
    let mp4 = m.out.join("fox.mp4");
    let log = succeeds(&args(&["--model-dir", d, "--latents", "7", "--seed", "1", "--out", mp4.to_str().unwrap()]));
    assert!(log.contains("denoising path") && log.contains("TTFF") && log.contains("total with VAE"), "{log}");
    let size = fs::metadata(&mp4).unwrap().len();
    let mut reader = mp4::Mp4Reader::read_header(BufReader::new(File::open(&mp4).unwrap()), size).unwrap();
    let track = reader.tracks().values().next().unwrap();
    assert_eq!((track.sample_count(), track.width(), track.height()), (25, 16, 16));
    let id = track.track_id();
    assert!(reader.read_sample(id, 25).unwrap().is_some(), "the last frame is in the file");

    // Wan layout + flags, GIF from --seconds 1.5 = 24 frames, rounded up to 25 (7 latents).
    let log = succeeds(&m.wan_args("fox.gif", &["--seconds", "1.5", "--seed", "1"]));
    assert!(log.contains("requested 24 frames; rounded up to 25 frames = 7 latents"), "{log}");
    let gif = GifDecoder::new(BufReader::new(File::open(m.out.join("fox.gif")).unwrap())).unwrap();
    let frames = gif.into_frames().collect_frames().unwrap();
    assert_eq!(frames.len(), 25);
    assert_eq!(frames[0].buffer().dimensions(), (16, 16));

    // PNG frames (5 latents, 2 chunks, to keep the debug-build VAE quick): same seed -> same
    // frames, also across executors; another seed -> others.
    let run = |dir: &str, extra: &[&str]| {
        succeeds(&m.wan_args(dir, &[&["--latents", "5"][..], extra].concat()));
        png_frames(&m.out.join(dir))
    };
    // The first run encodes the prompt into the cache, the second takes it from there.
    let cache = m.out.join("prompts.safetensors");
    let cached = ["--seed", "1", "--prompt-cache", cache.to_str().unwrap()];
    let log = succeeds(&m.wan_args("seed1/", &[&["--latents", "5"][..], &cached].concat()));
    assert!(log.contains("encoded on the CPU"), "{log}");
    let first = png_frames(&m.out.join("seed1/"));
    assert_eq!(first.len(), 17);
    assert!(first.iter().any(|f| f != &first[0]), "the video is not one still frame");
    let log = succeeds(&m.wan_args("again/", &[&["--latents", "5"][..], &cached].concat()));
    assert!(log.contains("from the prompt cache"), "{log}");
    assert_eq!(png_frames(&m.out.join("again/")), first, "same seed, same frames (and the cached prompt is the encoded one)");
    for executor in ["wavefront", "streaming", "batched"] {
        assert_eq!(run(&format!("{executor}/"), &["--seed", "1", "--executor", executor]), first, "{executor}");
    }
    assert_ne!(run("seed2/", &["--seed", "2"]), first, "another seed, another video");
    // The contract's knobs reach the graph: fewer stages, a denser anchor grid, a shorter history,
    // and the ablations each make another video of the same length.
    let log =
        succeeds(&m.wan_args("knobs/", &["--latents", "5", "--seed", "1", "--stages", "2", "--anchor-stride", "2", "--history", "1"]));
    assert!(log.contains("S = 2, Δ = 2, G = 3, H = 1"), "{log}");
    let knobs = png_frames(&m.out.join("knobs/"));
    assert_eq!(knobs.len(), 17);
    assert_ne!(knobs, first, "the knobs changed nothing");
    let ablated = run("ablated/", &["--seed", "1", "--no-anchors", "--no-history"]);
    assert_eq!(ablated.len(), 17);
    assert_ne!(ablated, first, "the ablations changed nothing");
    // The baselines run through the same command.
    for schedule in ["self-forcing", "hiar", "bidirectional"] {
        let frames = run(&format!("{schedule}/"), &["--schedule", schedule]);
        assert_eq!(frames.len(), 17, "{schedule}");
    }
}

#[test]
fn refuses_bad_requests_with_clear_errors() {
    let m = models("errors");
    let d = m.diffusers.to_str().unwrap();
    let base = |extra: &[&str]| -> Vec<String> {
        let out = m.out.join("x.mp4");
        let mut all = args(&["--model-dir", d, "--latents", "4"]);
        if !extra.contains(&"--out") {
            all.extend(args(&["--out", out.to_str().unwrap()]));
        }
        all.extend(args(extra));
        all
    };

    // Devices: CUDA in this CPU-only build, and unknown names.
    let err = fails(&base(&["--devices", "cuda:0"]));
    assert!(err.contains("cuda:[0]") && err.contains("without the `cuda` feature"), "{err}");
    let err = fails(&base(&["--devices", "tpu:0"]));
    assert!(err.contains("unknown device 'tpu:0'"), "{err}");

    // Prompts over 512 tokens.
    let long = vec!["fox"; 600].join(" ");
    let err = fails(&[base(&[]), args(&["--prompt", &long])].concat());
    assert!(err.contains("601 tokens") && err.contains("at most 512"), "{err}");

    // A memory limit the estimate does not fit.
    let err = fails(&base(&["--memory-limit", "0.0001"]));
    assert!(err.contains("not enough memory on cpu"), "{err}");

    // An output format the sinks do not write.
    let avi = m.out.join("video.avi");
    let err = fails(&base(&["--out", avi.to_str().unwrap()]));
    assert!(err.contains("unsupported video output `.avi`"), "{err}");

    // Frame sizes the VAE and patch cannot make.
    let err = fails(&[base(&[]), args(&["--height", "24"])].concat());
    assert!(err.contains("--height 24 must be a positive multiple of 16"), "{err}");

    // Mismatched files: an encoder whose width is not the DiT's text_dim.
    let config = m.diffusers.join("text_encoder/config.json");
    let wide = fs::read_to_string(&config).unwrap().replace("\"d_model\":24", "\"d_model\":32");
    write(&config, wide);
    let err = fails(&m.wan_args("x.mp4", &["--latents", "4"]));
    assert!(err.contains("mismatched model files") && err.contains("text_encoder/config.json"), "{err}");
    // Weights that do not fit their config name the file and the tensor.
    write(&config, fs::read_to_string(&config).unwrap().replace("\"d_model\":32", "\"d_model\":24").replace("\"d_ff\":40", "\"d_ff\":48"));
    let err = fails(&m.wan_args("x.mp4", &["--latents", "4"]));
    assert!(err.contains("model.safetensors") && err.contains("DenseReluDense"), "{err}");

    // A missing file is named with where it was looked for.
    fs::remove_file(m.diffusers.join("vae/diffusion_pytorch_model.safetensors")).unwrap();
    fs::remove_dir_all(m.diffusers.join("tokenizer")).unwrap();
    let err = fails(&base(&[]));
    assert!(err.contains("tokenizer: not found in --model-dir") && err.contains("tokenizer/tokenizer.json"), "{err}");
    assert!(err.contains("vae: not found") && err.contains("vae/diffusion_pytorch_model.safetensors"), "{err}");
    let err = fails(&base(&["--vae", "/nonexistent/vae.pth"]));
    assert!(err.contains("vae: /nonexistent/vae.pth does not exist"), "{err}");
}
