//! Where the model files of `generate` are: each file by flag, or found in a model directory in
//! either layout Wan-AI publishes, or in the Hugging Face hub cache.
//!
//! | file | Wan2.1 original layout | diffusers layout |
//! | --- | --- | --- |
//! | DiT weights | `diffusion_pytorch_model.safetensors` (or its `.index.json` + shards) | `transformer/` (same names) |
//! | DiT config | `config.json` | `transformer/config.json` |
//! | VAE | `Wan2.1_VAE.pth` (Wan2.1 preset) | `vae/diffusion_pytorch_model.safetensors` + `vae/config.json` |
//! | text encoder | `models_t5_umt5-xxl-enc-bf16.pth` (umT5-XXL preset) | `text_encoder/model.safetensors(.index.json)` + `text_encoder/config.json` |
//! | tokenizer | `google/umt5-xxl/tokenizer.json` | `tokenizer/tokenizer.json` |
//!
//! Without `--model-dir`, the files come from a [`Fallback`]: `generate` reads the default model,
//! the small world's student shipped in the repository ([`default_model_dir`]: `$FF_MODEL_DIR`,
//! else the checkout's `models/world/`), or with `--hub` the hub cache, as `encode-videos` always
//! does. The hub cache (`$HF_HUB_CACHE`, else `$HF_HOME/hub`, else
//! `$XDG_CACHE_HOME/huggingface/hub`, else `~/.cache/huggingface/hub`) is searched for the
//! snapshots of [`HUB_REPOS`] (`models--Wan-AI--<name>/snapshots/<hash>`, the hash from
//! `refs/main` when present). A flag always wins over what a directory provides.
//!
//! The default model is found through the path of this crate's source at build time rather than
//! embedded in the binary: its weights are retrained without a rebuild of every test binary, and
//! a binary moved off the checkout reads them from `$FF_MODEL_DIR`.

use std::path::{Path, PathBuf};

use anyhow::{Result, bail};

/// The variable that names the default model directory instead of the checkout's `models/world`.
pub const MODEL_DIR_ENV: &str = "FF_MODEL_DIR";

/// The default model directory: `$FF_MODEL_DIR` when set, else `models/world` of the checkout
/// this binary was built from.
pub fn default_model_dir(env: impl Fn(&str) -> Option<String>) -> PathBuf {
    match env(MODEL_DIR_ENV).filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).ancestors().nth(2).expect("crates/ff-cli is two levels deep").join("models/world"),
    }
}

/// Where the files come from when `--model-dir` is not given.
#[derive(Debug, Clone, Copy)]
pub enum Fallback<'a> {
    /// The Hugging Face hub cache rooted here (`None`: no cache to search).
    Hub(Option<&'a Path>),
    /// The default model directory ([`default_model_dir`]).
    Default(&'a Path),
}

/// Hub repositories searched in the cache, in order.
pub const HUB_REPOS: [&str; 4] =
    ["Wan-AI/Wan2.1-T2V-1.3B", "Wan-AI/Wan2.1-T2V-1.3B-Diffusers", "Wan-AI/Wan2.1-T2V-14B", "Wan-AI/Wan2.1-T2V-14B-Diffusers"];

/// Files given one by one on the command line (each overrides the directory's).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct FileFlags {
    /// Directory with the model files (Wan2.1 original or diffusers layout); default: the
    /// default model (`generate`) or the Hugging Face hub cache (`encode-videos`).
    #[arg(long)]
    pub model_dir: Option<PathBuf>,
    /// DiT weights: a .safetensors file, a shard index json, a directory, or a .pt checkpoint.
    #[arg(long)]
    pub dit: Option<PathBuf>,
    /// DiT config.json (Wan or diffusers field names).
    #[arg(long)]
    pub dit_config: Option<PathBuf>,
    /// VAE weights (Wan2.1_VAE.pth or diffusers safetensors).
    #[arg(long)]
    pub vae: Option<PathBuf>,
    /// VAE config.json (diffusers); default: the Wan2.1 VAE.
    #[arg(long)]
    pub vae_config: Option<PathBuf>,
    /// umT5 encoder weights (Wan .pth or transformers safetensors).
    #[arg(long)]
    pub text_encoder: Option<PathBuf>,
    /// umT5 config.json (transformers); default: umT5-XXL.
    #[arg(long)]
    pub text_encoder_config: Option<PathBuf>,
    /// tokenizer.json of google/umt5-xxl.
    #[arg(long)]
    pub tokenizer: Option<PathBuf>,
}

/// Every file `generate` reads. `None` configs mean the preset of the released model.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelFiles {
    pub dit: PathBuf,
    pub dit_config: PathBuf,
    pub vae: PathBuf,
    pub vae_config: Option<PathBuf>,
    pub text_encoder: PathBuf,
    pub text_encoder_config: Option<PathBuf>,
    pub tokenizer: PathBuf,
}

/// The files one directory layout offers (absent ones are `None`).
#[derive(Debug, Default)]
struct Found {
    dit: Option<PathBuf>,
    dit_config: Option<PathBuf>,
    vae: Option<PathBuf>,
    vae_config: Option<PathBuf>,
    text_encoder: Option<PathBuf>,
    text_encoder_config: Option<PathBuf>,
    tokenizer: Option<PathBuf>,
}

impl FileFlags {
    /// Resolves every file from the flags, the model directory, or `fallback` (for the hub, the
    /// cache root to search; see [`hub_cache_dir`]). Errors name each missing file and where it
    /// was looked for.
    pub fn resolve(&self, fallback: Fallback) -> Result<ModelFiles> {
        // Said once, after the list of missing files: where else to look.
        let (origin, found, hint) = match (&self.model_dir, fallback) {
            (Some(dir), _) => {
                if !dir.is_dir() {
                    bail!("--model-dir {}: no such directory", dir.display());
                }
                (format!("--model-dir {}", dir.display()), scan(dir), String::new())
            }
            (None, Fallback::Hub(hub)) => match hub.and_then(find_hub_snapshot) {
                Some(snapshot) => (format!("the Hugging Face cache ({})", snapshot.display()), scan(&snapshot), String::new()),
                None => (
                    "the Hugging Face cache (no --model-dir given)".to_string(),
                    Found::default(),
                    format!(
                        "\nno snapshot of {} in the Hugging Face cache{}; download one with \
                         `huggingface-cli download {}` or pass --model-dir DIR",
                        HUB_REPOS.join(", "),
                        hub.map(|h| format!(" ({})", h.display())).unwrap_or_default(),
                        HUB_REPOS[0]
                    ),
                ),
            },
            (None, Fallback::Default(dir)) => (
                format!("the default model {} (no --model-dir given)", dir.display()),
                scan_diffusers(dir),
                format!(
                    "\nthe default model is the small world's FlashForward student: train it with \
                     scripts/train-default.sh, or point ${MODEL_DIR_ENV} at a copy; for Wan2.1 pass \
                     --model-dir DIR or --hub (the Hugging Face cache)"
                ),
            ),
        };
        let mut missing = Vec::new();
        let mut pick = |flag: &Option<PathBuf>, found: Option<PathBuf>, name: &str, expected: &str| {
            let path = flag.clone().or(found);
            match &path {
                Some(p) if !p.exists() => missing.push(format!("{name}: {} does not exist", p.display())),
                None => missing.push(format!("{name}: not found in {origin} (expected {expected}; or pass --{name})")),
                Some(_) => {}
            }
            path.unwrap_or_default()
        };
        let dit = pick(&self.dit, found.dit, "dit", "diffusion_pytorch_model*.safetensors or transformer/");
        let dit_config = pick(&self.dit_config, found.dit_config, "dit-config", "config.json or transformer/config.json");
        let vae = pick(&self.vae, found.vae, "vae", "Wan2.1_VAE.pth or vae/diffusion_pytorch_model.safetensors");
        let text_encoder = pick(&self.text_encoder, found.text_encoder, "text-encoder", "models_t5_umt5-xxl-enc-bf16.pth or text_encoder/");
        let tokenizer = pick(&self.tokenizer, found.tokenizer, "tokenizer", "google/umt5-xxl/tokenizer.json or tokenizer/tokenizer.json");
        let mut optional = |flag: &Option<PathBuf>, found: Option<PathBuf>, name: &str| {
            let path = flag.clone().or(found);
            if let Some(p) = path.as_ref().filter(|p| !p.exists()) {
                missing.push(format!("{name}: {} does not exist", p.display()));
            }
            path
        };
        let vae_config = optional(&self.vae_config, found.vae_config, "vae-config");
        let text_encoder_config = optional(&self.text_encoder_config, found.text_encoder_config, "text-encoder-config");
        if !missing.is_empty() {
            bail!("model files missing:\n  {}{hint}", missing.join("\n  "));
        }
        Ok(ModelFiles { dit, dit_config, vae, vae_config, text_encoder, text_encoder_config, tokenizer })
    }
}

/// The DiT weights and config of model directory `dir` (either layout), for commands that use
/// only the DiT.
pub fn dit_files(dir: &Path) -> Result<(PathBuf, PathBuf)> {
    if !dir.is_dir() {
        bail!("--model-dir {}: no such directory", dir.display());
    }
    match scan(dir) {
        Found { dit: Some(dit), dit_config: Some(config), .. } => Ok((dit, config)),
        _ => bail!(
            "--model-dir {}: no DiT (expected diffusion_pytorch_model*.safetensors and config.json, or transformer/ with both)",
            dir.display()
        ),
    }
}

/// The files `dir` holds in the diffusers layout (when it has `transformer/` or `vae/`, e.g. the
/// small world's folder before its student is trained) or the original one.
fn scan(dir: &Path) -> Found {
    if dir.join("transformer").is_dir() || dir.join("vae").is_dir() {
        return scan_diffusers(dir);
    }
    let file = |rel: &str| Some(dir.join(rel)).filter(|p| p.is_file());
    Found {
        dit: file("diffusion_pytorch_model.safetensors.index.json").or_else(|| file("diffusion_pytorch_model.safetensors")),
        dit_config: file("config.json"),
        vae: file("Wan2.1_VAE.pth"),
        vae_config: None,
        text_encoder: file("models_t5_umt5-xxl-enc-bf16.pth"),
        text_encoder_config: None,
        tokenizer: file("google/umt5-xxl/tokenizer.json"),
    }
}

/// The files `dir` holds in the diffusers layout.
fn scan_diffusers(dir: &Path) -> Found {
    let file = |rel: &str| Some(dir.join(rel)).filter(|p| p.is_file());
    let sub = |name: &str| Some(dir.join(name)).filter(|p| p.is_dir());
    Found {
        dit: sub("transformer"),
        dit_config: file("transformer/config.json"),
        vae: file("vae/diffusion_pytorch_model.safetensors"),
        vae_config: file("vae/config.json"),
        text_encoder: sub("text_encoder"),
        text_encoder_config: file("text_encoder/config.json"),
        tokenizer: file("tokenizer/tokenizer.json"),
    }
}

/// The hub cache root from the environment (see the module docs); `None` without a home.
pub fn hub_cache_dir(env: impl Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let var = |name: &str| env(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    var("HF_HUB_CACHE")
        .or_else(|| var("HF_HOME").map(|h| h.join("hub")))
        .or_else(|| var("XDG_CACHE_HOME").map(|c| c.join("huggingface/hub")))
        .or_else(|| var("HOME").map(|h| h.join(".cache/huggingface/hub")))
}

/// The snapshot of the first [`HUB_REPOS`] entry cached under `hub`: the one `refs/main` names,
/// else the most recently modified.
fn find_hub_snapshot(hub: &Path) -> Option<PathBuf> {
    HUB_REPOS.iter().find_map(|repo| {
        let root = hub.join(format!("models--{}", repo.replace('/', "--")));
        let snapshots = root.join("snapshots");
        if let Ok(hash) = std::fs::read_to_string(root.join("refs/main")) {
            let named = snapshots.join(hash.trim());
            if named.is_dir() {
                return Some(named);
            }
        }
        std::fs::read_dir(&snapshots)
            .ok()?
            .filter_map(|e| e.ok())
            .filter(|e| e.path().is_dir())
            .max_by_key(|e| e.metadata().and_then(|m| m.modified()).ok())
            .map(|e| e.path())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    struct Scratch(PathBuf);

    impl Scratch {
        fn new(name: &str) -> Self {
            let dir = std::env::temp_dir().join(format!("ff-generate-paths-{}-{name}", std::process::id()));
            let _ = fs::remove_dir_all(&dir);
            fs::create_dir_all(&dir).unwrap();
            Self(dir)
        }

        fn touch(&self, rels: &[impl AsRef<str>]) -> &Self {
            for rel in rels {
                let path = self.0.join(rel.as_ref());
                fs::create_dir_all(path.parent().unwrap()).unwrap();
                fs::write(path, b"x").unwrap();
            }
            self
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    const ORIGINAL: [&str; 5] = [
        "diffusion_pytorch_model.safetensors",
        "config.json",
        "Wan2.1_VAE.pth",
        "models_t5_umt5-xxl-enc-bf16.pth",
        "google/umt5-xxl/tokenizer.json",
    ];

    const DIFFUSERS: [&str; 8] = [
        "model_index.json",
        "transformer/diffusion_pytorch_model.safetensors",
        "transformer/config.json",
        "vae/diffusion_pytorch_model.safetensors",
        "vae/config.json",
        "text_encoder/model.safetensors",
        "text_encoder/config.json",
        "tokenizer/tokenizer.json",
    ];

    fn dir_flags(dir: &Path) -> FileFlags {
        FileFlags { model_dir: Some(dir.to_path_buf()), ..Default::default() }
    }

    #[test]
    fn original_layout_is_found() {
        let s = Scratch::new("original");
        s.touch(&ORIGINAL);
        let files = dir_flags(&s.0).resolve(Fallback::Hub(None)).unwrap();
        let d = &s.0;
        assert_eq!(
            files,
            ModelFiles {
                dit: d.join(ORIGINAL[0]),
                dit_config: d.join("config.json"),
                vae: d.join("Wan2.1_VAE.pth"),
                vae_config: None,
                text_encoder: d.join("models_t5_umt5-xxl-enc-bf16.pth"),
                text_encoder_config: None,
                tokenizer: d.join("google/umt5-xxl/tokenizer.json"),
            }
        );
        // 14B: shards and an index; the index is the checkpoint.
        let sharded = Scratch::new("sharded");
        sharded.touch(&ORIGINAL[1..]).touch(&[
            "diffusion_pytorch_model-00001-of-00002.safetensors",
            "diffusion_pytorch_model-00002-of-00002.safetensors",
            "diffusion_pytorch_model.safetensors.index.json",
        ]);
        let files = dir_flags(&sharded.0).resolve(Fallback::Hub(None)).unwrap();
        assert_eq!(files.dit, sharded.0.join("diffusion_pytorch_model.safetensors.index.json"));
    }

    #[test]
    fn diffusers_layout_is_found() {
        let s = Scratch::new("diffusers");
        s.touch(&DIFFUSERS);
        let files = dir_flags(&s.0).resolve(Fallback::Hub(None)).unwrap();
        let d = &s.0;
        assert_eq!(files.dit, d.join("transformer"));
        assert_eq!(files.dit_config, d.join("transformer/config.json"));
        assert_eq!(files.vae, d.join("vae/diffusion_pytorch_model.safetensors"));
        assert_eq!(files.vae_config, Some(d.join("vae/config.json")));
        assert_eq!(files.text_encoder, d.join("text_encoder"));
        assert_eq!(files.text_encoder_config, Some(d.join("text_encoder/config.json")));
        assert_eq!(files.tokenizer, d.join("tokenizer/tokenizer.json"));
    }

    #[test]
    fn a_diffusers_directory_without_a_transformer_gives_its_other_files() {
        let s = Scratch::new("no-transformer");
        s.touch(&DIFFUSERS[3..]).touch(&["teacher/config.json", "teacher/diffusion_pytorch_model.safetensors"]);
        let flags = FileFlags { dit: Some(s.0.join("teacher")), dit_config: Some(s.0.join("teacher/config.json")), ..dir_flags(&s.0) };
        let files = flags.resolve(Fallback::Hub(None)).unwrap();
        assert_eq!((files.vae, files.dit), (s.0.join("vae/diffusion_pytorch_model.safetensors"), s.0.join("teacher")));
    }

    #[test]
    fn flags_override_the_directory() {
        let s = Scratch::new("override");
        s.touch(&ORIGINAL).touch(&["mine/vae.safetensors", "mine/vae.json"]);
        let flags =
            FileFlags { vae: Some(s.0.join("mine/vae.safetensors")), vae_config: Some(s.0.join("mine/vae.json")), ..dir_flags(&s.0) };
        let files = flags.resolve(Fallback::Hub(None)).unwrap();
        assert_eq!(files.vae, s.0.join("mine/vae.safetensors"));
        assert_eq!(files.vae_config, Some(s.0.join("mine/vae.json")));
        assert_eq!(files.dit, s.0.join(ORIGINAL[0]));
    }

    #[test]
    fn missing_files_are_named() {
        let s = Scratch::new("missing");
        s.touch(&ORIGINAL[..3]);
        let flags = FileFlags { tokenizer: Some(s.0.join("nope/tokenizer.json")), ..dir_flags(&s.0) };
        let err = flags.resolve(Fallback::Hub(None)).unwrap_err().to_string();
        assert!(err.contains("text-encoder: not found in --model-dir"), "{err}");
        assert!(err.contains("models_t5_umt5-xxl-enc-bf16.pth"), "{err}");
        assert!(err.contains("nope/tokenizer.json does not exist"), "{err}");
        assert!(!err.contains("dit:"), "the DiT is there: {err}");
        let err = FileFlags::default().resolve(Fallback::Hub(None)).unwrap_err().to_string();
        assert!(err.contains("no --model-dir") && err.contains("huggingface-cli download Wan-AI/Wan2.1-T2V-1.3B"), "{err}");
        assert_eq!(err.matches(HUB_REPOS[3]).count(), 1, "the repositories are listed once: {err}");
        let err = dir_flags(&s.0.join("absent")).resolve(Fallback::Hub(None)).unwrap_err().to_string();
        assert!(err.contains("absent: no such directory"), "{err}");
    }

    #[test]
    fn hub_cache_snapshots_are_found() {
        let hub = Scratch::new("hub");
        let repo = "models--Wan-AI--Wan2.1-T2V-1.3B-Diffusers";
        let snap = |hash: &str| DIFFUSERS.map(|f| format!("{repo}/snapshots/{hash}/{f}"));
        hub.touch(&snap("aaaa")).touch(&snap("bbbb"));
        fs::create_dir_all(hub.0.join(repo).join("refs")).unwrap();
        fs::write(hub.0.join(repo).join("refs/main"), "aaaa\n").unwrap();
        let files = FileFlags::default().resolve(Fallback::Hub(Some(&hub.0))).unwrap();
        assert_eq!(files.dit, hub.0.join(repo).join("snapshots/aaaa/transformer"));
        // --model-dir wins over the cache.
        let dir = Scratch::new("hub-dir");
        dir.touch(&ORIGINAL);
        assert_eq!(dir_flags(&dir.0).resolve(Fallback::Hub(Some(&hub.0))).unwrap().dit, dir.0.join(ORIGINAL[0]));
    }

    #[test]
    fn the_default_model_is_found_without_flags() {
        let world = Scratch::new("default");
        world.touch(&DIFFUSERS[1..]);
        let files = FileFlags::default().resolve(Fallback::Default(&world.0)).unwrap();
        assert_eq!((files.dit, files.tokenizer), (world.0.join("transformer"), world.0.join("tokenizer/tokenizer.json")));
        let wan = Scratch::new("default-wan");
        wan.touch(&ORIGINAL);
        assert_eq!(dir_flags(&wan.0).resolve(Fallback::Default(&world.0)).unwrap().dit, wan.0.join(ORIGINAL[0]), "--model-dir wins");
        let untrained = Scratch::new("default-untrained");
        untrained.touch(&DIFFUSERS[3..]);
        let err = FileFlags::default().resolve(Fallback::Default(&untrained.0)).unwrap_err().to_string();
        assert!(err.contains("dit: not found in the default model"), "{err}");
        assert!(!err.contains("vae:") && !err.contains("tokenizer:"), "the default model's other files are there: {err}");
        for hint in ["scripts/train-default.sh", "FF_MODEL_DIR", "--model-dir DIR or --hub"] {
            assert!(err.contains(hint), "{hint}: {err}");
        }
        assert_eq!(default_model_dir(|k| (k == MODEL_DIR_ENV).then(|| "/m".to_string())), PathBuf::from("/m"));
        let repo = default_model_dir(|_| None);
        assert!(repo.ends_with("models/world") && repo.join("../../crates/ff-cli/Cargo.toml").is_file(), "{}", repo.display());
    }

    #[test]
    fn hub_cache_root_follows_the_environment() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| pairs.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string())
        };
        assert_eq!(hub_cache_dir(env(&[("HF_HUB_CACHE", "/c"), ("HF_HOME", "/h")])), Some("/c".into()));
        assert_eq!(hub_cache_dir(env(&[("HF_HOME", "/h"), ("HOME", "/home/u")])), Some("/h/hub".into()));
        assert_eq!(hub_cache_dir(env(&[("XDG_CACHE_HOME", "/x")])), Some("/x/huggingface/hub".into()));
        assert_eq!(hub_cache_dir(env(&[("HOME", "/home/u")])), Some("/home/u/.cache/huggingface/hub".into()));
        assert_eq!(hub_cache_dir(env(&[])), None);
    }
}
