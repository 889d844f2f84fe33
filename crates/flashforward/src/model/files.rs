//! Where a model's files are: each file named on its own, or found in a model folder in either
//! layout Wan-AI publishes, or in the Hugging Face hub cache.
//!
//! | file | Wan2.1 original layout | diffusers layout |
//! | --- | --- | --- |
//! | DiT weights | `diffusion_pytorch_model.safetensors` (or its `.index.json` + shards) | `transformer/` (same names) |
//! | DiT config | `config.json` | `transformer/config.json` |
//! | VAE | `Wan2.1_VAE.pth` (Wan2.1 preset) | `vae/diffusion_pytorch_model.safetensors` + `vae/config.json` |
//! | text encoder | `models_t5_umt5-xxl-enc-bf16.pth` (umT5-XXL preset) | `text_encoder/model.safetensors(.index.json)` + `text_encoder/config.json` |
//! | tokenizer | `google/umt5-xxl/tokenizer.json` | `tokenizer/tokenizer.json` |
//!
//! Without a model folder, the files come from a [`Fallback`]: the default model, the small
//! world's student shipped in the repository ([`default_model_dir`]: `$FF_MODEL_DIR`, else the
//! checkout's `models/world/`), or the hub cache. The hub cache is read with the `hf-hub` crate's
//! cache API (no download client is built in): its root is `$HF_HUB_CACHE` when set (as the
//! Python `huggingface_hub` does), else `hf-hub`'s (`$HF_HOME/hub`, else
//! `~/.cache/huggingface/hub`), and the snapshot of the first of [`HUB_REPOS`] that `refs/main`
//! names is used. A file named on its own always wins over what a folder provides.
//!
//! The default model is found through the path of this crate's source at build time rather than
//! embedded in the binary: its weights are retrained without a rebuild of every test binary, and
//! a binary moved off the checkout reads them from `$FF_MODEL_DIR`.

use std::path::{Path, PathBuf};

use crate::error::{Result, invalid};

/// The variable that names the default model directory instead of the checkout's `models/world`.
pub const MODEL_DIR_ENV: &str = "FF_MODEL_DIR";

/// The default model's folder: `$FF_MODEL_DIR` when set, else `models/world` of the checkout
/// this crate was built from; an error naming both when the folder does not exist.
///
/// ```
/// let dir = flashforward::default_model_dir().unwrap();
/// assert!(dir.join("flashforward.json").is_file() || dir.join("transformer").is_dir());
/// ```
pub fn default_model_dir() -> Result<PathBuf> {
    let dir = default_model_dir_in(|k| std::env::var(k).ok());
    match dir.is_dir() {
        true => Ok(dir),
        false => invalid!(
            "the default model folder {} does not exist: set ${MODEL_DIR_ENV} to a copy of the repository's models/world",
            dir.display()
        ),
    }
}

/// [`default_model_dir`] with the environment `env`, whether or not the folder exists.
pub fn default_model_dir_in(env: impl Fn(&str) -> Option<String>) -> PathBuf {
    match env(MODEL_DIR_ENV).filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => {
            Path::new(env!("CARGO_MANIFEST_DIR")).ancestors().nth(2).expect("crates/flashforward is two levels deep").join("models/world")
        }
    }
}

/// Where the files come from when no model folder is given.
#[derive(Debug, Clone, Copy)]
pub enum Fallback<'a> {
    /// The Hugging Face hub cache ([`hub_cache`]; `None`: no cache to search).
    Hub(Option<&'a hf_hub::Cache>),
    /// The default model directory ([`default_model_dir`]).
    Default(&'a Path),
}

/// Hub repositories searched in the cache, in order.
pub const HUB_REPOS: [&str; 4] =
    ["Wan-AI/Wan2.1-T2V-1.3B", "Wan-AI/Wan2.1-T2V-1.3B-Diffusers", "Wan-AI/Wan2.1-T2V-14B", "Wan-AI/Wan2.1-T2V-14B-Diffusers"];

/// A model folder and files named one by one (each overrides the folder's; the CLI's `--dit`,
/// `--vae`, ... flags).
#[derive(Debug, Clone, Default)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct FileOverrides {
    /// Folder with the model files (Wan2.1 original or diffusers layout).
    #[cfg_attr(feature = "clap", arg(long))]
    pub model_dir: Option<PathBuf>,
    /// DiT weights: a .safetensors file, a shard index json, a folder, or a .pt checkpoint.
    #[cfg_attr(feature = "clap", arg(long))]
    pub dit: Option<PathBuf>,
    /// DiT config.json (Wan or diffusers field names).
    #[cfg_attr(feature = "clap", arg(long))]
    pub dit_config: Option<PathBuf>,
    /// VAE weights (Wan2.1_VAE.pth or diffusers safetensors).
    #[cfg_attr(feature = "clap", arg(long))]
    pub vae: Option<PathBuf>,
    /// VAE config.json (diffusers); default: the Wan2.1 VAE.
    #[cfg_attr(feature = "clap", arg(long))]
    pub vae_config: Option<PathBuf>,
    /// umT5 encoder weights (Wan .pth or transformers safetensors).
    #[cfg_attr(feature = "clap", arg(long))]
    pub text_encoder: Option<PathBuf>,
    /// umT5 config.json (transformers); default: umT5-XXL.
    #[cfg_attr(feature = "clap", arg(long))]
    pub text_encoder_config: Option<PathBuf>,
    /// tokenizer.json of google/umt5-xxl.
    #[cfg_attr(feature = "clap", arg(long))]
    pub tokenizer: Option<PathBuf>,
}

/// Every file a generation reads. `None` configs mean the preset of the released model.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelFiles {
    /// DiT weights (a file, a shard index, an exported student's folder, or a training run).
    pub dit: PathBuf,
    /// DiT config.json.
    pub dit_config: PathBuf,
    /// VAE weights.
    pub vae: PathBuf,
    /// VAE config.json (`None`: the Wan2.1 VAE).
    pub vae_config: Option<PathBuf>,
    /// umT5 encoder weights.
    pub text_encoder: PathBuf,
    /// umT5 config.json (`None`: umT5-XXL).
    pub text_encoder_config: Option<PathBuf>,
    /// tokenizer.json.
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

impl ModelFiles {
    /// The files of the model folder `dir` (either layout).
    pub fn from_dir(dir: impl Into<PathBuf>) -> Result<Self> {
        FileOverrides { model_dir: Some(dir.into()), ..Default::default() }.resolve(Fallback::Hub(None))
    }
}

impl FileOverrides {
    /// Resolves every file from the overrides, the model folder, or `fallback`. Errors name each
    /// missing file and where it was looked for.
    pub fn resolve(&self, fallback: Fallback) -> Result<ModelFiles> {
        // Said once, after the list of missing files: where else to look.
        let (origin, found, hint) = match (&self.model_dir, fallback) {
            (Some(dir), _) => {
                if !dir.is_dir() {
                    invalid!("--model-dir {}: no such directory", dir.display());
                }
                (format!("--model-dir {}", dir.display()), scan(dir), String::new())
            }
            (None, Fallback::Hub(hub)) => match hub.and_then(hub_snapshot) {
                Some(snapshot) => (format!("the Hugging Face cache ({})", snapshot.display()), scan(&snapshot), String::new()),
                None => (
                    "the Hugging Face cache (no --model-dir given)".to_string(),
                    Found::default(),
                    format!(
                        "\nno snapshot of {} in the Hugging Face cache{}; download one with \
                         `huggingface-cli download {}` or pass --model-dir DIR",
                        HUB_REPOS.join(", "),
                        hub.map(|h| format!(" ({})", h.path().display())).unwrap_or_default(),
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
            invalid!("model files missing:\n  {}{hint}", missing.join("\n  "));
        }
        Ok(ModelFiles { dit, dit_config, vae, vae_config, text_encoder, text_encoder_config, tokenizer })
    }
}

/// The DiT weights and config of model folder `dir` (either layout), for work that uses only
/// the DiT (training).
pub fn dit_files(dir: &Path) -> Result<(PathBuf, PathBuf)> {
    if !dir.is_dir() {
        invalid!("--model-dir {}: no such directory", dir.display());
    }
    match scan(dir) {
        Found { dit: Some(dit), dit_config: Some(config), .. } => Ok((dit, config)),
        _ => invalid!(
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

/// The Hugging Face hub cache of this environment (see the module docs); `None` without
/// `$HF_HUB_CACHE`, `$HF_HOME` or a home folder.
pub fn hub_cache() -> Option<hf_hub::Cache> {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    match (var("HF_HUB_CACHE"), var("HF_HOME"), var("HOME")) {
        (Some(root), ..) => Some(hf_hub::Cache::new(root.into())),
        (None, None, None) => None,
        _ => Some(hf_hub::Cache::from_env()),
    }
}

/// The snapshot folder of the first [`HUB_REPOS`] entry in `cache` whose `refs/main` snapshot
/// holds a model (its `model_index.json`, diffusers layout, or `config.json`, original layout).
fn hub_snapshot(cache: &hf_hub::Cache) -> Option<PathBuf> {
    HUB_REPOS.iter().find_map(|repo| {
        let repo = cache.model(repo.to_string());
        let marker = repo.get("model_index.json").or_else(|| repo.get("config.json"))?;
        marker.parent().map(Path::to_path_buf)
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

    fn dir_overrides(dir: &Path) -> FileOverrides {
        FileOverrides { model_dir: Some(dir.to_path_buf()), ..Default::default() }
    }

    #[test]
    fn original_layout_is_found() {
        let s = Scratch::new("original");
        s.touch(&ORIGINAL);
        let files = dir_overrides(&s.0).resolve(Fallback::Hub(None)).unwrap();
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
        let files = dir_overrides(&sharded.0).resolve(Fallback::Hub(None)).unwrap();
        assert_eq!(files.dit, sharded.0.join("diffusion_pytorch_model.safetensors.index.json"));
    }

    #[test]
    fn diffusers_layout_is_found() {
        let s = Scratch::new("diffusers");
        s.touch(&DIFFUSERS);
        let files = dir_overrides(&s.0).resolve(Fallback::Hub(None)).unwrap();
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
        let flags =
            FileOverrides { dit: Some(s.0.join("teacher")), dit_config: Some(s.0.join("teacher/config.json")), ..dir_overrides(&s.0) };
        let files = flags.resolve(Fallback::Hub(None)).unwrap();
        assert_eq!((files.vae, files.dit), (s.0.join("vae/diffusion_pytorch_model.safetensors"), s.0.join("teacher")));
    }

    #[test]
    fn flags_override_the_directory() {
        let s = Scratch::new("override");
        s.touch(&ORIGINAL).touch(&["mine/vae.safetensors", "mine/vae.json"]);
        let flags = FileOverrides {
            vae: Some(s.0.join("mine/vae.safetensors")),
            vae_config: Some(s.0.join("mine/vae.json")),
            ..dir_overrides(&s.0)
        };
        let files = flags.resolve(Fallback::Hub(None)).unwrap();
        assert_eq!(files.vae, s.0.join("mine/vae.safetensors"));
        assert_eq!(files.vae_config, Some(s.0.join("mine/vae.json")));
        assert_eq!(files.dit, s.0.join(ORIGINAL[0]));
    }

    #[test]
    fn missing_files_are_named() {
        let s = Scratch::new("missing");
        s.touch(&ORIGINAL[..3]);
        let flags = FileOverrides { tokenizer: Some(s.0.join("nope/tokenizer.json")), ..dir_overrides(&s.0) };
        let err = flags.resolve(Fallback::Hub(None)).unwrap_err().to_string();
        assert!(err.contains("text-encoder: not found in --model-dir"), "{err}");
        assert!(err.contains("models_t5_umt5-xxl-enc-bf16.pth"), "{err}");
        assert!(err.contains("nope/tokenizer.json does not exist"), "{err}");
        assert!(!err.contains("dit:"), "the DiT is there: {err}");
        let err = FileOverrides::default().resolve(Fallback::Hub(None)).unwrap_err().to_string();
        assert!(err.contains("no --model-dir") && err.contains("huggingface-cli download Wan-AI/Wan2.1-T2V-1.3B"), "{err}");
        assert_eq!(err.matches(HUB_REPOS[3]).count(), 1, "the repositories are listed once: {err}");
        let err = dir_overrides(&s.0.join("absent")).resolve(Fallback::Hub(None)).unwrap_err().to_string();
        assert!(err.contains("absent: no such directory"), "{err}");
    }

    #[test]
    fn hub_cache_snapshots_are_found() {
        let hub = Scratch::new("hub");
        let repo = "models--Wan-AI--Wan2.1-T2V-1.3B-Diffusers";
        let snap = |hash: &str| DIFFUSERS.map(|f| format!("{repo}/snapshots/{hash}/{f}"));
        hub.touch(&snap("aaaa")).touch(&snap("bbbb"));
        fs::create_dir_all(hub.0.join(repo).join("refs")).unwrap();
        // huggingface_hub writes the commit hash without a newline
        fs::write(hub.0.join(repo).join("refs/main"), "aaaa").unwrap();
        let cache = hf_hub::Cache::new(hub.0.clone());
        let files = FileOverrides::default().resolve(Fallback::Hub(Some(&cache))).unwrap();
        assert_eq!(files.dit, hub.0.join(repo).join("snapshots/aaaa/transformer"), "the snapshot refs/main names");
        // --model-dir wins over the cache.
        let dir = Scratch::new("hub-dir");
        dir.touch(&ORIGINAL);
        assert_eq!(dir_overrides(&dir.0).resolve(Fallback::Hub(Some(&cache))).unwrap().dit, dir.0.join(ORIGINAL[0]));
    }

    #[test]
    fn the_default_model_is_found_without_flags() {
        let world = Scratch::new("default");
        world.touch(&DIFFUSERS[1..]);
        let files = FileOverrides::default().resolve(Fallback::Default(&world.0)).unwrap();
        assert_eq!((files.dit, files.tokenizer), (world.0.join("transformer"), world.0.join("tokenizer/tokenizer.json")));
        let wan = Scratch::new("default-wan");
        wan.touch(&ORIGINAL);
        assert_eq!(dir_overrides(&wan.0).resolve(Fallback::Default(&world.0)).unwrap().dit, wan.0.join(ORIGINAL[0]), "--model-dir wins");
        let untrained = Scratch::new("default-untrained");
        untrained.touch(&DIFFUSERS[3..]);
        let err = FileOverrides::default().resolve(Fallback::Default(&untrained.0)).unwrap_err().to_string();
        assert!(err.contains("dit: not found in the default model"), "{err}");
        assert!(!err.contains("vae:") && !err.contains("tokenizer:"), "the default model's other files are there: {err}");
        for hint in ["scripts/train-default.sh", "FF_MODEL_DIR", "--model-dir DIR or --hub"] {
            assert!(err.contains(hint), "{hint}: {err}");
        }
        assert_eq!(default_model_dir_in(|k| (k == MODEL_DIR_ENV).then(|| "/m".to_string())), PathBuf::from("/m"));
        let repo = default_model_dir_in(|_| None);
        assert!(repo.ends_with("models/world") && repo.join("../../crates/ff-cli/Cargo.toml").is_file(), "{}", repo.display());
    }
}
