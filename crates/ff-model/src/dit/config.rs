//! [`DitConfig`]: the Wan2.1 T2V DiT hyper-parameters, presets, and `config.json` parsing in either
//! the original Wan field names (`dim`, `in_dim`, `num_heads`, ...) or the diffusers ones
//! (`num_attention_heads` × `attention_head_dim`, `in_channels`, ...).

use crate::error::ModelError; // not `Result`: the `Config` derive expands to code that uses std's
use burn::config::Config;
use serde_json::Value;
use std::path::Path;

/// Hyper-parameters of the Wan2.1 text-to-video DiT.
#[derive(Config, Debug, PartialEq)]
pub struct DitConfig {
    /// Patch size over (frames, height, width) of the latent.
    pub patch_size: [usize; 3],
    /// Latent channels in (16).
    pub in_channels: usize,
    /// Latent channels out (16).
    pub out_channels: usize,
    /// Hidden size (heads × head_dim).
    pub dim: usize,
    /// FFN inner size.
    pub ffn_dim: usize,
    /// Sinusoidal time-embedding size.
    pub freq_dim: usize,
    /// Text-encoder output size (umT5-XXL: 4096).
    pub text_dim: usize,
    /// Attention heads.
    pub num_heads: usize,
    /// Transformer blocks.
    pub num_layers: usize,
    /// Epsilon of every norm.
    #[config(default = 1e-6)]
    pub eps: f64,
    /// Positions per RoPE axis (latent frames, rows, columns); beyond is an error.
    #[config(default = 1024)]
    pub rope_max_positions: usize,
    /// Base of the RoPE frequencies.
    #[config(default = 10000.0)]
    pub rope_theta: f64,
    /// Prompt tokens the text encoder pads to.
    #[config(default = 512)]
    pub text_len: usize,
}

impl DitConfig {
    /// The tiny random model of the reference fixtures (2 layers, 2 heads × 16).
    pub fn tiny() -> Self {
        Self::new([1, 2, 2], 16, 16, 32, 64, 256, 24, 2, 2)
    }

    /// The small world's teacher: Wan's architecture at tiny width (4 layers, 4 heads × 32) on 16
    /// latent channels, reading the 64-d embeddings of `Umt5Config::tiny_world` padded to 32 tokens.
    pub fn tiny_world() -> Self {
        Self::new([1, 2, 2], 16, 16, 128, 256, 256, 64, 4, 4).with_text_len(32)
    }

    /// A mid-size preset for CPU benchmarks (8 layers, 8 heads × 64).
    pub fn small() -> Self {
        Self::new([1, 2, 2], 16, 16, 512, 1536, 256, 256, 8, 8)
    }

    /// Wan2.1-T2V-1.3B.
    pub fn wan_t2v_1_3b() -> Self {
        Self::new([1, 2, 2], 16, 16, 1536, 8960, 256, 4096, 12, 30)
    }

    /// Wan2.1-T2V-14B.
    pub fn wan_t2v_14b() -> Self {
        Self::new([1, 2, 2], 16, 16, 5120, 13824, 256, 4096, 40, 40)
    }

    /// Names of the presets, as accepted by [`DitConfig::preset`].
    pub const PRESETS: [&'static str; 5] = ["tiny", "tiny-world", "small", "1.3b", "14b"];

    /// A preset by name: `tiny`, `tiny-world`, `small`, `1.3b`, `14b`.
    pub fn preset(name: &str) -> Option<Self> {
        Some(match name {
            "tiny" => Self::tiny(),
            "tiny-world" => Self::tiny_world(),
            "small" => Self::small(),
            "1.3b" => Self::wan_t2v_1_3b(),
            "14b" => Self::wan_t2v_14b(),
            _ => return None,
        })
    }

    /// Channels per head: `dim / num_heads`.
    pub fn head_dim(&self) -> usize {
        self.dim / self.num_heads
    }

    /// Values per output token: out_channels × patch volume.
    pub fn patch_out(&self) -> usize {
        self.out_channels * self.patch_size.iter().product::<usize>()
    }

    /// Reads a Wan or diffusers `config.json`, or a fixture `meta.json` (its `config` object).
    pub fn from_json(path: impl AsRef<Path>) -> crate::error::Result<Self> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| ModelError::io(path, e))?;
        let json: Value = serde_json::from_str(&text).map_err(|source| ModelError::Json { path: path.to_path_buf(), source })?;
        let json = json.get("config").filter(|c| c.is_object()).unwrap_or(&json);
        Self::from_value(json).map_err(|e| ModelError::Config(format!("{}: {e}", path.display())))
    }

    /// Parses the fields of a config object in either naming.
    pub fn from_value(v: &Value) -> std::result::Result<Self, String> {
        let num = |names: &[&str]| -> Option<usize> { names.iter().find_map(|n| v.get(*n)?.as_u64()).map(|x| x as usize) };
        let need = |names: &[&str]| num(names).ok_or_else(|| format!("missing field '{}'", names.join("' or '")));
        if let Some(t) = v.get("model_type").and_then(Value::as_str).filter(|t| *t != "t2v") {
            return Err(format!("model_type '{t}' is not supported (text-to-video 't2v' only)"));
        }
        if v.get("image_dim").is_some_and(|d| !d.is_null()) {
            return Err("image conditioning ('image_dim') is not supported".into());
        }
        let num_heads = need(&["num_heads", "num_attention_heads"])?;
        let dim = match num(&["dim"]) {
            Some(d) => d,
            None => num_heads.checked_mul(need(&["attention_head_dim"])?).ok_or("num_heads × attention_head_dim overflows")?,
        };
        let patch_size = match v.get("patch_size").and_then(Value::as_array) {
            Some(p) => {
                let p: Vec<usize> = p.iter().filter_map(|x| x.as_u64().map(|x| x as usize)).collect();
                <[usize; 3]>::try_from(p).map_err(|_| "'patch_size' must hold 3 sizes".to_string())?
            }
            None => [1, 2, 2],
        };
        let qk_norm_ok = match v.get("qk_norm") {
            None | Some(Value::Bool(true)) => true,
            Some(Value::String(s)) => s == "rms_norm_across_heads",
            _ => false,
        };
        if !qk_norm_ok {
            return Err(format!("qk_norm {:?} is not supported (Wan2.1 uses RMS norm across heads)", v["qk_norm"]));
        }
        if v.get("cross_attn_norm").and_then(Value::as_bool) == Some(false) {
            return Err("cross_attn_norm = false is not supported".into());
        }
        let mut c = Self::new(
            patch_size,
            need(&["in_dim", "in_channels"])?,
            need(&["out_dim", "out_channels"])?,
            dim,
            need(&["ffn_dim"])?,
            num(&["freq_dim"]).unwrap_or(256),
            num(&["text_dim"]).unwrap_or(4096),
            num_heads,
            need(&["num_layers"])?,
        );
        if let Some(eps) = v.get("eps").and_then(Value::as_f64) {
            c.eps = eps;
        }
        if let Some(n) = num(&["rope_max_seq_len"]) {
            c.rope_max_positions = n;
        }
        if let Some(n) = num(&["text_len"]) {
            c.text_len = n;
        }
        c.validate()?;
        Ok(c)
    }

    /// Checks the invariants the forward relies on.
    pub fn validate(&self) -> std::result::Result<(), String> {
        if self.num_heads == 0 || !self.dim.is_multiple_of(self.num_heads) {
            return Err(format!("dim {} is not a multiple of num_heads {}", self.dim, self.num_heads));
        }
        let hd = self.head_dim();
        if !hd.is_multiple_of(2) || hd < 6 {
            return Err(format!("head_dim {hd} must be even and at least 6 for 3-D RoPE"));
        }
        if !self.freq_dim.is_multiple_of(2) {
            return Err(format!("freq_dim {} must be even", self.freq_dim));
        }
        if self.patch_size.contains(&0) {
            return Err("patch_size entries must be positive".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wan_and_diffusers_names_give_the_same_config() {
        let wan: Value = serde_json::json!({"_class_name": "WanModel", "dim": 1536, "eps": 1e-06, "ffn_dim": 8960,
            "freq_dim": 256, "in_dim": 16, "model_type": "t2v", "num_heads": 12, "num_layers": 30, "out_dim": 16,
            "text_len": 512, "patch_size": [1, 2, 2], "qk_norm": true, "cross_attn_norm": true, "window_size": [-1, -1]});
        let diff: Value = serde_json::json!({"_class_name": "WanTransformer3DModel", "attention_head_dim": 128,
            "cross_attn_norm": true, "eps": 1e-06, "ffn_dim": 8960, "freq_dim": 256, "in_channels": 16,
            "num_attention_heads": 12, "num_layers": 30, "out_channels": 16, "patch_size": [1, 2, 2],
            "qk_norm": "rms_norm_across_heads", "rope_max_seq_len": 1024, "text_dim": 4096});
        assert_eq!(DitConfig::from_value(&wan).unwrap(), DitConfig::wan_t2v_1_3b());
        assert_eq!(DitConfig::from_value(&diff).unwrap(), DitConfig::wan_t2v_1_3b());
    }

    #[test]
    fn unsupported_variants_are_named() {
        let i2v = serde_json::json!({"model_type": "i2v", "dim": 32, "num_heads": 2, "in_dim": 36, "out_dim": 16,
            "ffn_dim": 64, "num_layers": 1});
        assert!(DitConfig::from_value(&i2v).unwrap_err().contains("i2v"));
        let missing = serde_json::json!({"dim": 32, "num_heads": 2});
        assert!(DitConfig::from_value(&missing).unwrap_err().contains("in_dim"));
    }
}
