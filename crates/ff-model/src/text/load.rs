//! Loading umT5 encoder weights through the crate's checkpoint loader, from either layout:
//!
//! * transformers (`UMT5EncoderModel` / `save_pretrained`): `shared.weight` (and its tied copy
//!   `encoder.embed_tokens.weight`), `encoder.block.N.layer.0.SelfAttention.{q,k,v,o}.weight`,
//!   `...SelfAttention.relative_attention_bias.weight`, `encoder.block.N.layer.{0,1}.layer_norm.weight`,
//!   `encoder.block.N.layer.1.DenseReluDense.{wi_0,wi_1,wo}.weight`, `encoder.final_layer_norm.weight`;
//! * Wan2.1 (`models_t5_umt5-xxl-enc-bf16.pth`, bf16): `token_embedding.weight`,
//!   `blocks.N.{norm1,norm2}.weight`, `blocks.N.attn.{q,k,v,o}.weight`,
//!   `blocks.N.pos_embedding.embedding.weight`, `blocks.N.ffn.{gate.0,fc1,fc2}.weight`,
//!   `norm.weight`. The Burn module mirrors this layout.
//!
//! The layout is detected from the keys; half-precision weights are cast to the backend dtype.

use super::config::Umt5Config;
use super::encoder::Umt5Encoder;
use crate::error::{ModelError, Result};
use crate::load::{CheckpointFiles, KeyRemap, checkpoint_keys, load_checkpoint, module_tensors};
use burn::tensor::backend::Backend;
use std::path::Path;

/// Key layout of a umT5 encoder checkpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Umt5Layout {
    /// transformers `UMT5EncoderModel` keys (`encoder.block.N.layer...`).
    Transformers,
    /// Wan2.1's original `T5Encoder` keys (`blocks.N...`).
    Wan,
}

impl Umt5Layout {
    /// Detects the layout from a checkpoint's keys; `origin` names the checkpoint in errors.
    pub fn detect(keys: &[String], origin: &Path) -> Result<Self> {
        let any = |prefixes: &[&str]| keys.iter().any(|k| prefixes.iter().any(|p| k.starts_with(p)));
        match (any(&["shared.", "encoder."]), any(&["token_embedding.", "blocks."])) {
            (true, false) => Ok(Self::Transformers),
            (false, true) => Ok(Self::Wan),
            (true, true) => Err(ModelError::corrupt(origin, "mixes transformers (encoder.*) and Wan (blocks.*) umT5 keys")),
            (false, false) => Err(ModelError::corrupt(
                origin,
                "no umT5 encoder keys (expected 'shared.weight'/'encoder.block.*' or 'token_embedding.weight'/'blocks.*')",
            )),
        }
    }

    /// File key -> Burn module path.
    pub fn remap(self) -> KeyRemap {
        match self {
            Self::Wan => KeyRemap::new(&[(r"^blocks\.(\d+)\.ffn\.gate\.0\.", "blocks.$1.ffn.gate.")]),
            Self::Transformers => KeyRemap::new(&[
                (r"^(shared|encoder\.embed_tokens)\.", "token_embedding."),
                (r"^encoder\.block\.(\d+)\.layer\.0\.SelfAttention\.relative_attention_bias\.", "blocks.$1.pos_embedding.embedding."),
                (r"^encoder\.block\.(\d+)\.layer\.0\.SelfAttention\.", "blocks.$1.attn."),
                (r"^encoder\.block\.(\d+)\.layer\.0\.layer_norm\.", "blocks.$1.norm1."),
                (r"^encoder\.block\.(\d+)\.layer\.1\.layer_norm\.", "blocks.$1.norm2."),
                (r"^encoder\.block\.(\d+)\.layer\.1\.DenseReluDense\.wi_0\.", "blocks.$1.ffn.gate."),
                (r"^encoder\.block\.(\d+)\.layer\.1\.DenseReluDense\.wi_1\.", "blocks.$1.ffn.fc1."),
                (r"^encoder\.block\.(\d+)\.layer\.1\.DenseReluDense\.wo\.", "blocks.$1.ffn.fc2."),
                (r"^encoder\.final_layer_norm\.", "norm."),
            ])
            .with_tied(r"^encoder\.embed_tokens\.weight$"),
        }
    }
}

impl<B: Backend> Umt5Encoder<B> {
    /// Builds an encoder for `config` and loads a checkpoint of either layout (a `.safetensors`
    /// file, a sharded index or directory, or a `.pth` pickle). Missing, unexpected or misshapen
    /// tensors are errors naming the file and key.
    pub fn load(path: impl AsRef<Path>, config: &Umt5Config, device: &B::Device) -> Result<Self> {
        let files = CheckpointFiles::resolve(path.as_ref())?;
        let layout = Umt5Layout::detect(&checkpoint_keys(&files)?, &files.origin)?;
        let mut encoder = config.init(device);
        load_checkpoint(&mut encoder, &files, &layout.remap(), |_| false)?;
        Ok(encoder)
    }

    /// Every parameter as `(key, data)` in the Wan layout (module paths, `Linear` weights
    /// `[out, in]`): written to a safetensors file, it loads back with [`Umt5Encoder::load`].
    pub fn file_tensors(&self) -> Result<Vec<(String, burn::tensor::TensorData)>> {
        module_tensors(self, str::to_string, |_| true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transformers_keys_map_to_module_paths() {
        let remap = Umt5Layout::Transformers.remap();
        let cases = [
            ("shared.weight", "token_embedding.weight"),
            ("encoder.embed_tokens.weight", "token_embedding.weight"),
            ("encoder.block.11.layer.0.SelfAttention.q.weight", "blocks.11.attn.q.weight"),
            ("encoder.block.0.layer.0.SelfAttention.o.weight", "blocks.0.attn.o.weight"),
            ("encoder.block.3.layer.0.SelfAttention.relative_attention_bias.weight", "blocks.3.pos_embedding.embedding.weight"),
            ("encoder.block.2.layer.0.layer_norm.weight", "blocks.2.norm1.weight"),
            ("encoder.block.2.layer.1.layer_norm.weight", "blocks.2.norm2.weight"),
            ("encoder.block.23.layer.1.DenseReluDense.wi_0.weight", "blocks.23.ffn.gate.weight"),
            ("encoder.block.23.layer.1.DenseReluDense.wi_1.weight", "blocks.23.ffn.fc1.weight"),
            ("encoder.block.23.layer.1.DenseReluDense.wo.weight", "blocks.23.ffn.fc2.weight"),
            ("encoder.final_layer_norm.weight", "norm.weight"),
        ];
        for (key, path) in cases {
            assert_eq!(remap.apply(key), path, "{key}");
        }
        assert!(remap.is_tied("encoder.embed_tokens.weight") && !remap.is_tied("shared.weight"));
    }

    #[test]
    fn wan_keys_map_to_module_paths() {
        let remap = Umt5Layout::Wan.remap();
        assert_eq!(remap.apply("blocks.7.ffn.gate.0.weight"), "blocks.7.ffn.gate.weight");
        for key in ["token_embedding.weight", "blocks.7.attn.k.weight", "blocks.0.pos_embedding.embedding.weight", "norm.weight"] {
            assert_eq!(remap.apply(key), key);
        }
    }

    #[test]
    fn layout_is_detected_from_keys() {
        let keys = |ks: &[&str]| ks.iter().map(|k| k.to_string()).collect::<Vec<_>>();
        let origin = Path::new("ckpt");
        assert_eq!(
            Umt5Layout::detect(&keys(&["shared.weight", "encoder.final_layer_norm.weight"]), origin).unwrap(),
            Umt5Layout::Transformers
        );
        assert_eq!(Umt5Layout::detect(&keys(&["token_embedding.weight", "norm.weight"]), origin).unwrap(), Umt5Layout::Wan);
        let err = Umt5Layout::detect(&keys(&["model.diffusion.weight"]), origin).unwrap_err().to_string();
        assert!(err.contains("ckpt") && err.contains("no umT5"), "{err}");
    }
}
