//! Hyper-parameters of the umT5 encoder, with the umT5-XXL preset used by Wan2.1 and a reader for
//! transformers `config.json` files (or the `config` object of a fixture's `meta.json`).

use crate::error::ModelError;
use burn::config::Config;
use serde_json::Value;
use std::path::Path;

/// Embedding rows of [`Umt5Config::tiny_world`]: room for the small world's word vocabulary.
pub const WORLD_VOCAB_SIZE: usize = 128;

/// Configuration of [`Umt5Encoder`](super::Umt5Encoder) (transformers field names).
#[derive(Config, Debug, PartialEq)]
pub struct Umt5Config {
    /// Token vocabulary size (rows of the embedding table).
    pub vocab_size: usize,
    /// Width of the residual stream.
    pub d_model: usize,
    /// Width of one attention head.
    pub d_kv: usize,
    /// Hidden width of the gated-GELU feed-forward.
    pub d_ff: usize,
    /// Number of encoder blocks.
    pub num_layers: usize,
    /// Number of attention heads.
    pub num_heads: usize,
    /// Relative-position buckets (half per direction).
    #[config(default = 32)]
    pub relative_attention_num_buckets: usize,
    /// Distance from which all relative positions share the last bucket.
    #[config(default = 128)]
    pub relative_attention_max_distance: usize,
    /// Epsilon of the RMS layer norms.
    #[config(default = 1e-6)]
    pub layer_norm_epsilon: f64,
}

impl Umt5Config {
    /// umT5-XXL encoder (`google/umt5-xxl`, Wan2.1's `models_t5_umt5-xxl-enc-bf16.pth`).
    pub fn umt5_xxl() -> Self {
        Self::new(256_384, 4096, 64, 10_240, 24, 64)
    }

    /// The small world's encoder: umT5's architecture at tiny width (2 blocks, 4 heads × 16,
    /// d_model 64) over a word-level vocabulary of at most [`WORLD_VOCAB_SIZE`] tokens (see
    /// [`word_level_tokenizer`](super::word_level_tokenizer)).
    pub fn tiny_world() -> Self {
        Self::new(WORLD_VOCAB_SIZE, 64, 16, 128, 2, 4)
    }

    /// Reads a transformers `config.json`, or a fixture `meta.json` holding it under `config`.
    /// Only the gated-GELU feed-forward of umT5 is supported; another `feed_forward_proj` is an
    /// error.
    pub fn from_json(path: &Path) -> crate::Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| ModelError::io(path, e))?;
        let json: Value = serde_json::from_str(&text).map_err(|source| ModelError::Json { path: path.to_path_buf(), source })?;
        let cfg = json.get("config").filter(|c| c.is_object()).unwrap_or(&json);
        Self::from_value(cfg).map_err(|why| ModelError::Config(format!("{}: {why}", path.display())))
    }

    fn from_value(cfg: &Value) -> std::result::Result<Self, String> {
        let int = |name: &str| -> std::result::Result<usize, String> {
            let v = cfg.get(name).ok_or_else(|| format!("missing field '{name}'"))?;
            v.as_u64().map(|v| v as usize).ok_or_else(|| format!("field '{name}' is not a non-negative integer: {v}"))
        };
        let opt_int = |name: &str| cfg.get(name).map(|_| int(name)).transpose();
        if let Some(proj) = cfg.get("feed_forward_proj").filter(|p| p.as_str() != Some("gated-gelu")) {
            return Err(format!("feed_forward_proj {proj} is not supported (umT5 uses \"gated-gelu\")"));
        }
        let mut c = Self::new(int("vocab_size")?, int("d_model")?, int("d_kv")?, int("d_ff")?, int("num_layers")?, int("num_heads")?);
        if let Some(n) = opt_int("relative_attention_num_buckets")? {
            c.relative_attention_num_buckets = n;
        }
        if let Some(n) = opt_int("relative_attention_max_distance")? {
            c.relative_attention_max_distance = n;
        }
        if let Some(eps) = cfg.get("layer_norm_epsilon") {
            c.layer_norm_epsilon = eps.as_f64().ok_or_else(|| format!("field 'layer_norm_epsilon' is not a number: {eps}"))?;
        }
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(name: &str, text: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("ff-umt5-config-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("config.json");
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn reads_transformers_config_of_umt5_xxl() {
        // Fields as in google/umt5-xxl's config.json (abridged; extra fields are ignored).
        let path = write(
            "xxl",
            r#"{"architectures":["UMT5ForConditionalGeneration"],"d_ff":10240,"d_kv":64,"d_model":4096,
            "dense_act_fn":"gelu_new","feed_forward_proj":"gated-gelu","layer_norm_epsilon":1e-06,
            "num_heads":64,"num_layers":24,"relative_attention_max_distance":128,
            "relative_attention_num_buckets":32,"vocab_size":256384}"#,
        );
        assert_eq!(Umt5Config::from_json(&path).unwrap(), Umt5Config::umt5_xxl());
    }

    #[test]
    fn reads_fixture_meta_and_rejects_other_ffn() {
        let path = write(
            "meta",
            r#"{"config":{"vocab_size":200,"d_model":48,"d_kv":12,"d_ff":80,"num_layers":3,"num_heads":4,
            "relative_attention_num_buckets":16,"relative_attention_max_distance":64,"layer_norm_epsilon":1e-5},
            "source":"transformers.UMT5EncoderModel"}"#,
        );
        let c = Umt5Config::from_json(&path).unwrap();
        assert_eq!((c.vocab_size, c.d_model, c.d_kv, c.d_ff, c.num_layers, c.num_heads), (200, 48, 12, 80, 3, 4));
        assert_eq!((c.relative_attention_num_buckets, c.relative_attention_max_distance), (16, 64));
        assert_eq!(c.layer_norm_epsilon, 1e-5);

        let relu =
            write("relu", r#"{"vocab_size":2,"d_model":4,"d_kv":2,"d_ff":8,"num_layers":1,"num_heads":2,"feed_forward_proj":"relu"}"#);
        let err = Umt5Config::from_json(&relu).unwrap_err().to_string();
        assert!(err.contains("feed_forward_proj") && err.contains("config.json"), "{err}");
        let missing = write("missing", r#"{"vocab_size":2}"#);
        assert!(Umt5Config::from_json(&missing).unwrap_err().to_string().contains("'d_model'"));
    }
}
