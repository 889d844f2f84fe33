//! `flashforward generate` end to end on the CPU, with tiny random-weight models written in the
//! real file layouts: the DiT in the original Wan layout (`diffusion_pytorch_model.safetensors`
//! with Wan key names + `config.json`) and in the diffusers layout (`transformer/`), the Wan VAE
//! (diffusers `vae/`), a transformers umT5 encoder (`text_encoder/`) and a word-level
//! `tokenizer.json` shaped like umT5's (the diffusers directory is assembled by `common`).
//! Frames are 16×16 px = 2×2 latents = 1 token per latent frame.

use std::fs::{self, File};
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use image::AnimationDecoder;
use image::codecs::gif::GifDecoder;

mod common;
use common::{Scratch, diffusers_dir, fixtures, tokenizer_json, write};

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
    // The splice baseline keeps the planner's anchors (latents 0 and 4) in the video.
    let spliced = run("splice/", &["--seed", "1", "--splice"]);
    assert_eq!(spliced.len(), 17);
    assert_ne!(spliced, first, "the planner's anchors replaced nothing");
    let err = fails(&m.wan_args("no-splice/", &["--latents", "5", "--splice", "--no-anchors"]));
    assert!(err.contains("--splice") && err.contains("has none"), "{err}");
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

    // An empty prompt (a negative prompt may be empty, the prompt may not).
    for empty in ["", "  \t "] {
        let err = fails(&[base(&[]), args(&["--prompt", empty])].concat());
        assert!(err.contains("the prompt is empty"), "{err}");
    }

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

    // An OS error is printed once, not once by the library error and again as its cause.
    let cache = m.out.join("cache-is-a-dir.safetensors");
    fs::create_dir_all(&cache).unwrap();
    let err = fails(&base(&["--prompt-cache", cache.to_str().unwrap()]));
    assert!(err.contains("cache-is-a-dir.safetensors") && err.contains("(os error"), "{err}");
    assert_eq!(err.matches("(os error").count(), 1, "the OS message printed twice: {err}");

    // The output is checked first, before any model file is looked at (the VAE below is gone):
    // a directory that cannot be made, and a file name the file system refuses.
    let not_a_dir = m.out.join("file");
    write(&not_a_dir, b"x");
    let err = fails(&base(&["--out", not_a_dir.join("x.mp4").to_str().unwrap(), "--vae", "/nonexistent/vae.pth"]));
    assert!(err.contains("cannot create the directory") && !err.contains("vae"), "{err}");
    let long = m.out.join(format!("{}.mp4", "a".repeat(250)));
    let err = fails(&base(&["--out", long.to_str().unwrap(), "--vae", "/nonexistent/vae.pth"]));
    assert!(err.contains("cannot write") && !err.contains("vae.pth"), "{err}");

    // A missing file is named with where it was looked for.
    fs::remove_file(m.diffusers.join("vae/diffusion_pytorch_model.safetensors")).unwrap();
    fs::remove_dir_all(m.diffusers.join("tokenizer")).unwrap();
    let err = fails(&base(&[]));
    assert!(err.contains("tokenizer: not found in --model-dir") && err.contains("tokenizer/tokenizer.json"), "{err}");
    assert!(err.contains("vae: not found") && err.contains("vae/diffusion_pytorch_model.safetensors"), "{err}");
    let err = fails(&base(&["--vae", "/nonexistent/vae.pth"]));
    assert!(err.contains("vae: /nonexistent/vae.pth does not exist"), "{err}");
    // --hub without a cached snapshot: one hint naming the repositories once.
    let out = m.out.join("x.mp4");
    let empty_hub = m.out.join("hub");
    let out = Command::new(env!("CARGO_BIN_EXE_flashforward"))
        .args(["generate", "--hub", "--prompt", PROMPT, "--latents", "4", "--out", out.to_str().unwrap()])
        .env("HF_HUB_CACHE", &empty_hub)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("huggingface-cli download Wan-AI/Wan2.1-T2V-1.3B"), "{err}");
    assert_eq!(err.matches("Wan-AI/Wan2.1-T2V-14B-Diffusers").count(), 1, "{err}");
}

#[test]
fn help_documents_seed_width_ttff_and_the_model_rule() {
    let out = Command::new(env!("CARGO_BIN_EXE_flashforward")).args(["generate", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{help}");
    let model_rule = ["without model flags, the default model", "models/world/", "$FF_MODEL_DIR", "--hub", "Wan2.1: --model-dir DIR"];
    for text in ["Seed of the initial", "Frame width in pixels", "TTFF (time to first frames)", "status 130"].into_iter().chain(model_rule)
    {
        assert!(help.contains(text), "generate --help lacks {text:?}:\n{help}");
    }
}

/// Frames of an MP4 file.
fn mp4_frames(path: &Path) -> u32 {
    let size = fs::metadata(path).unwrap().len();
    let reader = mp4::Mp4Reader::read_header(BufReader::new(File::open(path).unwrap()), size).unwrap();
    reader.tracks().values().next().unwrap().sample_count()
}

#[test]
fn ctrl_c_stops_after_the_chunk_in_flight_with_a_playable_partial_video() {
    let m = models("ctrl-c");
    let mp4 = m.out.join("partial.mp4");
    // 30 latents = 10 chunks = 117 frames: long enough to interrupt after the first chunk.
    let mut all = args(&["generate", "--prompt", PROMPT, "--height", "16", "--width", "16"]);
    all.extend(m.wan_args("partial.mp4", &["--latents", "30", "--executor", "serial"]));
    let mut child = Command::new(env!("CARGO_BIN_EXE_flashforward"))
        .args(&all)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The MP4 is rewritten after every chunk: its appearance means the first chunk is on disk.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(600);
    while !mp4.exists() {
        assert!(std::time::Instant::now() < deadline && child.try_wait().unwrap().is_none(), "no first chunk");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let kill = Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    assert!(kill.success());
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    let frames = mp4_frames(&mp4);
    // chunk 0 decodes to 9 frames (the causal first latent), every later chunk to 12
    assert!(frames >= 9 && (frames - 9).is_multiple_of(12) && frames < 117, "{frames} frames");
    assert!(frames <= 9 + 12 * 2, "stopped after the chunk in flight, not later: {frames} frames");
    assert!(stdout.contains(&format!("{}: {frames} of 117 frames", mp4.display())), "{stdout}\n{stderr}");
    // Ctrl-C lands during the forwards ("stopped: worker 0: interrupted (Ctrl-C)") or, when the
    // VAE is the slow part, after the last forward ("stopped: interrupted (Ctrl-C)").
    assert!(stderr.lines().any(|l| l.starts_with("stopped: ") && l.ends_with("interrupted (Ctrl-C)")), "{stderr}");
}

/// A `train sft` run over the Wan-layout directory's DiT: `generate --dit RUN` renders with the
/// run's trained roles (base DiT + EMA adapters and role vectors), differently from the base.
#[test]
fn generates_with_the_roles_of_a_training_run() {
    // MP4 files to a checkpoint that generate loads: the small world's clips (16x16 px, 3 s = 13
    // latents), encoded with the tiny VAE and umT5, trained for two Phase 1 steps.
    let m = models("trained");
    let (videos, data) = (m.out.join("videos"), m.out.join("clips"));
    let videos_arg = videos.to_str().unwrap();
    let run_ok = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_flashforward")).args(args).output().unwrap();
        assert!(out.status.success(), "flashforward {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    run_ok(&["world", "clips", "--out", videos_arg, "--clips", "2", "--seconds", "3", "--width", "16", "--height", "16"]);
    let captions = videos.join("captions.jsonl");
    run_ok(&[
        "encode-videos",
        "--model-dir",
        m.diffusers.to_str().unwrap(),
        "--videos",
        videos_arg,
        "--captions",
        captions.to_str().unwrap(),
        "--out",
        data.to_str().unwrap(),
        "--height",
        "16",
        "--width",
        "16",
        "--latents",
        "12",
    ]);
    let (run, config) = (m.out.join("run"), m.out.join("sft.toml"));
    write(
        &config,
        "[train]\nbatch = 2\nlr = 1e-2\nwarmup_steps = 0\nema_decay = 0.0\nlora_rank = 4\nlora_alpha = 4.0\n[sft]\nlatents = 12\nanchor_stride = 4\nplanner_block = 2\nchunk = 2\nhistory = 2\nrebased_crops = 2\n",
    );
    let train = Command::new(env!("CARGO_BIN_EXE_flashforward"))
        .args(["train", "sft", "--model-dir", m.wan.to_str().unwrap(), "--data", data.to_str().unwrap()])
        .args(["--out", run.to_str().unwrap(), "--steps", "2", "--seed", "0", "--config", config.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(train.status.success(), "train sft failed: {}", String::from_utf8_lossy(&train.stderr));
    let frames = |dir: &str, extra: &[&str]| {
        succeeds(&m.wan_args(dir, &[&["--latents", "1", "--seed", "1"][..], extra].concat()));
        png_frames(&m.out.join(dir))
    };
    let trained = frames("trained/", &["--dit", run.to_str().unwrap()]);
    assert_eq!(trained.len(), 1);
    assert_ne!(trained, frames("base/", &[]), "the trained roles change the video");
}

/// FlashForward-CP: every planner forward sharded over 2 and 3 CPU devices (logical workers, each
/// with its own thread pool) draws the single-device planner's frames byte for byte (the shards
/// all-gather K/V, so every query row attends to the same keys in the same order). Anchor stride 1
/// at 5 latents: 5 anchors in blocks of 3 and 2, so on 3 devices one shard idles on the second.
#[test]
fn a_context_parallel_planner_draws_the_same_video() {
    let m = models("planner-cp");
    let run = |dir: &str, extra: &[&str]| {
        succeeds(&m.wan_args(dir, &[&["--latents", "5", "--seed", "3", "--anchor-stride", "1"][..], extra].concat()));
        png_frames(&m.out.join(dir))
    };
    let want = run("one/", &[]);
    assert_eq!(want.len(), 17);
    assert_eq!(run("cp2/", &["--devices", "cpu:0,1", "--planner-cp"]), want, "2 devices");
    assert_eq!(run("cp3/", &["--devices", "cpu:0,1,2", "--planner-cp"]), want, "3 devices");
    let err = fails(&m.wan_args("cp-serial/", &["--latents", "5", "--planner-cp", "--executor", "serial"]));
    assert!(err.contains("--planner-cp") && err.contains("wavefront"), "{err}");
}
