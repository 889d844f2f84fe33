//! Loading Wan2.1 DiT checkpoints: the original Wan layout (`blocks.N.self_attn.q.weight`, ...),
//! the diffusers layout (`blocks.N.attn1.to_q.weight`, ...; its `norm2` is Wan's `norm3`), sharded
//! safetensors with an index json, and Self-Forcing-style `.pt` files (`generator_ema` /
//! `generator`, keys prefixed `model.`). One ordered table maps every layout to module paths:
//! first diffusers names to Wan names, then Wan names to this crate's module paths.

use super::config::DitConfig;
use super::model::WanDit;
use crate::error::Result;
use crate::load::{CheckpointFiles, KeyRemap, load_checkpoint};
use kernels_cubecl::AttentionBackend;
use std::path::Path;

/// File key → module path rewrites, applied in order.
pub const DIT_KEY_RULES: &[(&str, &str)] = &[
    // Self-Forcing / CausVid checkpoints wrap the model as `model.`
    (r"^model\.", ""),
    // diffusers → Wan
    (r"^condition_embedder\.text_embedder\.linear_1\.", "text_embedding.0."),
    (r"^condition_embedder\.text_embedder\.linear_2\.", "text_embedding.2."),
    (r"^condition_embedder\.time_embedder\.linear_1\.", "time_embedding.0."),
    (r"^condition_embedder\.time_embedder\.linear_2\.", "time_embedding.2."),
    (r"^condition_embedder\.time_proj\.", "time_projection.1."),
    (r"^scale_shift_table$", "head.modulation"),
    (r"^proj_out\.", "head.head."),
    (r"\.scale_shift_table$", ".modulation"),
    (r"\.ffn\.net\.0\.proj\.", ".ffn.0."),
    (r"\.ffn\.net\.2\.", ".ffn.2."),
    (r"\.attn1\.to_out\.0\.", ".self_attn.o."),
    (r"\.attn2\.to_out\.0\.", ".cross_attn.o."),
    (r"\.attn1\.(?:to_)?", ".self_attn."),
    (r"\.attn2\.(?:to_)?", ".cross_attn."),
    (r"\.norm2\.", ".norm3."),
    // Wan → module paths
    (r"^patch_embedding\.", "patch_embedding.conv."),
    (r"^(text|time)_embedding\.0\.", "${1}_embedding.fc1."),
    (r"^(text|time)_embedding\.2\.", "${1}_embedding.fc2."),
    (r"^time_projection\.1\.", "time_projection."),
    (r"\.self_attn\.([qkvo])\.", ".self_attn.${1}.base."),
    (r"\.cross_attn\.([qo])\.", ".cross_attn.${1}.base."),
    (r"\.norm_([qk])\.weight$", ".norm_${1}.gamma"),
    (r"\.norm3\.weight$", ".norm3.gamma"),
    (r"\.norm3\.bias$", ".norm3.beta"),
    (r"\.ffn\.0\.", ".ffn.fc1."),
    (r"\.ffn\.2\.", ".ffn.fc2."),
];

/// The DiT key table as a [`KeyRemap`].
pub fn dit_key_remap() -> KeyRemap {
    KeyRemap::new(DIT_KEY_RULES)
}

/// Parameters a base checkpoint need not hold: role vectors and role adapters.
fn is_role_parameter(path: &str) -> bool {
    path.starts_with("role_embedding") || path.contains(".adapters.")
}

impl<B: AttentionBackend> WanDit<B> {
    /// Builds `config` and loads a checkpoint (file, shard index, directory or `.pt`) into it.
    pub fn load(config: &DitConfig, path: impl AsRef<Path>, device: &B::Device) -> Result<Self> {
        let mut model = config.init(device);
        model.load_weights(path)?;
        Ok(model)
    }

    /// Loads a checkpoint into this model. Role parameters absent from the file keep their values.
    pub fn load_weights(&mut self, path: impl AsRef<Path>) -> Result<()> {
        let files = CheckpointFiles::resolve(path)?;
        load_checkpoint(self, &files, &dit_key_remap(), is_role_parameter)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_layouts_map_to_the_same_paths() {
        let remap = dit_key_remap();
        let pairs = [
            ("blocks.3.attn1.to_q.weight", "blocks.3.self_attn.q.weight"),
            ("blocks.3.attn1.to_out.0.bias", "blocks.3.self_attn.o.bias"),
            ("blocks.0.attn2.to_k.weight", "blocks.0.cross_attn.k.weight"),
            ("blocks.0.attn2.norm_k.weight", "blocks.0.cross_attn.norm_k.weight"),
            ("blocks.1.norm2.weight", "blocks.1.norm3.weight"),
            ("blocks.1.ffn.net.0.proj.weight", "blocks.1.ffn.0.weight"),
            ("blocks.1.scale_shift_table", "blocks.1.modulation"),
            ("scale_shift_table", "head.modulation"),
            ("proj_out.bias", "head.head.bias"),
            ("condition_embedder.time_proj.weight", "time_projection.1.weight"),
            ("condition_embedder.text_embedder.linear_2.bias", "text_embedding.2.bias"),
        ];
        for (diffusers, wan) in pairs {
            assert_eq!(remap.apply(diffusers), remap.apply(wan), "{diffusers} vs {wan}");
            assert_eq!(remap.apply(&format!("model.{wan}")), remap.apply(wan));
        }
        assert_eq!(remap.apply("blocks.3.self_attn.q.weight"), "blocks.3.self_attn.q.base.weight");
        assert_eq!(remap.apply("blocks.0.cross_attn.k.weight"), "blocks.0.cross_attn.k.weight");
        assert_eq!(remap.apply("blocks.0.cross_attn.o.weight"), "blocks.0.cross_attn.o.base.weight");
        assert_eq!(remap.apply("blocks.1.norm3.bias"), "blocks.1.norm3.beta");
        assert_eq!(remap.apply("blocks.1.self_attn.norm_q.weight"), "blocks.1.self_attn.norm_q.gamma");
        assert_eq!(remap.apply("text_embedding.0.weight"), "text_embedding.fc1.weight");
        assert_eq!(remap.apply("patch_embedding.weight"), "patch_embedding.conv.weight");
        assert_eq!(remap.apply("time_projection.1.bias"), "time_projection.bias");
    }
}
