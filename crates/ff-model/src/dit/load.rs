//! Loading Wan2.1 DiT checkpoints: the original Wan layout (`blocks.N.self_attn.q.weight`, ...),
//! the diffusers layout (`blocks.N.attn1.to_q.weight`, ...; its `norm2` is Wan's `norm3`), sharded
//! safetensors with an index json, and Self-Forcing-style `.pt` files (`generator_ema` /
//! `generator`, keys prefixed `model.`). One ordered table maps every layout to module paths:
//! first diffusers names to Wan names, then Wan names to this crate's module paths.
//!
//! The crate writes its own weights (training checkpoints, exports) in the Wan layout plus the
//! role parameters under their module paths (`blocks.N.self_attn.q.adapters.R.a` `[in, rank]`,
//! `role_embedding` `[2, dim]`): [`WanDit::file_tensors`] and [`dit_file_key`] are the inverse of
//! the table, so such a file loads back through [`WanDit::load_weights`] unchanged.

use super::config::DitConfig;
use super::model::WanDit;
use crate::error::Result;
use crate::load::{CheckpointFiles, KeyRemap, load_checkpoint, module_tensors};
use burn::tensor::TensorData;
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
    // only the projection's own weight and bias: its role adapters keep their module paths
    (r"\.self_attn\.([qkvo])\.(weight|bias)$", ".self_attn.${1}.base.${2}"),
    (r"\.cross_attn\.([qo])\.(weight|bias)$", ".cross_attn.${1}.base.${2}"),
    (r"\.norm_([qk])\.weight$", ".norm_${1}.gamma"),
    (r"\.norm3\.weight$", ".norm3.gamma"),
    (r"\.norm3\.bias$", ".norm3.beta"),
    (r"\.ffn\.0\.", ".ffn.fc1."),
    (r"\.ffn\.2\.", ".ffn.fc2."),
];

/// Module path → Wan file key: the inverse of the Wan part of [`DIT_KEY_RULES`]. Role
/// parameters (adapters, role vectors) keep their module paths.
const DIT_FILE_KEY_RULES: &[(&str, &str)] = &[
    (r"^patch_embedding\.conv\.", "patch_embedding."),
    (r"^(text|time)_embedding\.fc1\.", "${1}_embedding.0."),
    (r"^(text|time)_embedding\.fc2\.", "${1}_embedding.2."),
    (r"^time_projection\.", "time_projection.1."),
    (r"\.(self_attn|cross_attn)\.([qkvo])\.base\.", ".${1}.${2}."),
    (r"\.norm_([qk])\.gamma$", ".norm_${1}.weight"),
    (r"\.norm3\.gamma$", ".norm3.weight"),
    (r"\.norm3\.beta$", ".norm3.bias"),
    (r"\.ffn\.fc1\.", ".ffn.0."),
    (r"\.ffn\.fc2\.", ".ffn.2."),
];

/// The DiT key table as a [`KeyRemap`].
pub fn dit_key_remap() -> KeyRemap {
    KeyRemap::new(DIT_KEY_RULES)
}

/// The key under which the crate writes the parameter at `module_path` (Wan layout; role
/// parameters under their module paths). `dit_key_remap().apply(&dit_file_key(p)) == p`.
pub fn dit_file_key(module_path: &str) -> String {
    static TABLE: std::sync::OnceLock<KeyRemap> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| KeyRemap::new(DIT_FILE_KEY_RULES)).apply(module_path)
}

/// Parameters a base checkpoint need not hold: role vectors and role adapters.
fn is_role_parameter(path: &str) -> bool {
    path.starts_with("role_embedding") || path.contains(".adapters.")
}

impl<B: AttentionBackend> WanDit<B> {
    /// Builds `config` and loads a checkpoint (file, shard index, directory or `.pt`) into it.
    pub fn load(config: &DitConfig, path: impl AsRef<Path>, device: &B::Device) -> Result<Self> {
        let _span = tracing::debug_span!("load_dit_weights", path = %path.as_ref().display()).entered();
        let mut model = config.init(device);
        model.load_weights(path)?;
        Ok(model)
    }

    /// Loads a checkpoint into this model. Role parameters absent from the file keep their values.
    pub fn load_weights(&mut self, path: impl AsRef<Path>) -> Result<()> {
        let files = CheckpointFiles::resolve(path)?;
        load_checkpoint(self, &files, &dit_key_remap(), is_role_parameter)
    }

    /// The parameters whose module path passes `keep`, as `(file key, data)` in the layout
    /// [`load_weights`](Self::load_weights) reads: Wan keys (`dit_file_key`), `Linear` weights
    /// transposed to PyTorch's `[out, in]`, the model's float dtype.
    pub fn file_tensors(&self, keep: impl Fn(&str) -> bool) -> Result<Vec<(String, TensorData)>> {
        module_tensors(self, dit_file_key, keep)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn_store::ModuleSnapshot;

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

    #[test]
    fn the_crates_own_keys_map_back_to_every_module_path() {
        use crate::lora::LoraConfig;
        let model = DitConfig::tiny().init::<burn::backend::NdArray>(&Default::default()).with_roles(&LoraConfig::new(2));
        let remap = dit_key_remap();
        let paths: Vec<String> = model.collect(None, None, false).iter().map(|s| s.full_path()).collect();
        assert!(paths.iter().any(|p| p == "blocks.1.cross_attn.o.adapters.1.b") && paths.iter().any(|p| p == "role_embedding"));
        for path in &paths {
            assert_eq!(&remap.apply(&dit_file_key(path)), path, "file key {}", dit_file_key(path));
        }
        assert_eq!(remap.apply("blocks.0.self_attn.q.adapters.0.a"), "blocks.0.self_attn.q.adapters.0.a");
        assert_eq!(dit_file_key("blocks.0.self_attn.q.base.weight"), "blocks.0.self_attn.q.weight");
        assert_eq!(dit_file_key("blocks.0.ffn.fc2.bias"), "blocks.0.ffn.2.bias");
    }

    #[test]
    fn file_tensors_are_in_the_wan_layout() {
        use crate::lora::LoraConfig;
        let model = DitConfig::tiny().init::<burn::backend::NdArray>(&Default::default()).with_roles(&LoraConfig::new(2));
        let tensors: std::collections::BTreeMap<String, TensorData> = model.file_tensors(|_| true).unwrap().into_iter().collect();
        // Linear weights as PyTorch writes them ([out, in]); adapters as the module holds them.
        assert_eq!(tensors["time_projection.1.weight"].shape.to_vec(), [6 * 32, 32]);
        assert_eq!(tensors["blocks.0.self_attn.q.adapters.0.a"].shape.to_vec(), [32, 2]);
        assert_eq!(tensors["patch_embedding.weight"].shape.to_vec(), [32, 16, 1, 2, 2]);
        let w = model.time_projection.weight.val().into_data().to_vec::<f32>().unwrap();
        let t = tensors["time_projection.1.weight"].to_vec::<f32>().unwrap();
        assert_eq!(t[1], w[6 * 32], "file [out, in] is the transpose of Burn's [in, out]");
        let roles_only = model.file_tensors(|p| p.contains(".adapters.") || p == "role_embedding").unwrap();
        assert_eq!(roles_only.len(), 2 * 2 * 6 * 2 + 1);
    }
}
