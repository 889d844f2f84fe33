//! Parity with diffusers (fixture), streaming decode in any chunking == diffusers' decode, both
//! checkpoint layouts.

use super::*;
use crate::load::read_tensors;
use burn::backend::NdArray;
use burn::module::Module;
use burn::tensor::{Distribution, Tensor, TensorData};
use burn_store::ModuleSnapshot;
use std::path::{Path, PathBuf};

type B = NdArray<f32>;

fn tiny_fixture() -> PathBuf {
    crate::fixture::dir().join("wan_vae_tiny")
}

fn rel_l2(a: Tensor<B, 5>, b: Tensor<B, 5>) -> f64 {
    assert_eq!(a.dims(), b.dims());
    let diff = (a - b.clone()).powi_scalar(2).sum().into_scalar() as f64;
    let norm = b.powi_scalar(2).sum().into_scalar() as f64;
    (diff / norm).sqrt()
}

#[test]
fn fixture_parity_encode_and_decode() {
    let results = crate::fixture::verify_fixture::<B>(&tiny_fixture(), &Default::default()).unwrap();
    assert!(!results.is_empty());
    for c in results {
        assert!(c.max_rel_err <= 1e-4, "{}: relative L2 error {:e} > 1e-4", c.weights, c.max_rel_err);
    }
}

fn random(shape: [usize; 5], seed: u64) -> Tensor<B, 5> {
    <B as burn::tensor::backend::Backend>::seed(&Default::default(), seed);
    Tensor::random(shape, Distribution::Uniform(-1.0, 1.0), &Default::default())
}

fn fixture_vae() -> WanVae<B> {
    let dir = tiny_fixture();
    let config = WanVaeConfig::from_json(dir.join("meta.json")).unwrap();
    WanVae::load(dir.join("weights_diffusers.safetensors"), &config, &Default::default()).unwrap()
}

#[test]
fn streaming_decode_matches_the_reference_decode() {
    // diffusers' whole-clip decode of the fixture latents is the reference (an independent
    // implementation); the stream decoder must reproduce it whatever the chunking
    let vae = fixture_vae();
    let expected = read_tensors(&tiny_fixture().join("expected.safetensors")).unwrap();
    let dev = Default::default();
    let latents: Tensor<B, 5> = Tensor::from_data(expected["latent_mean"].clone(), &dev);
    let reference: Tensor<B, 5> = Tensor::from_data(expected["decoded"].clone(), &dev);
    assert_eq!(latents.dims(), [1, 16, 3, 4, 4]);
    for chunks in [&[1, 1, 1][..], &[1, 2], &[2, 1], &[3]] {
        let mut stream = vae.stream_decoder();
        let mut parts = Vec::new();
        let mut start = 0;
        for &len in chunks {
            let part = stream.decode_chunk(latents.clone().narrow(2, start, len)).unwrap();
            // the first latent decodes to 1 frame, every later one to 4
            assert_eq!(part.dims()[2], 4 * len - usize::from(start == 0) * 3, "chunks {chunks:?} at latent {start}");
            parts.push(part);
            start += len;
        }
        assert_eq!(stream.latents_seen(), 3);
        let err = rel_l2(Tensor::cat(parts, 2), reference.clone());
        assert!(err <= 1e-4, "chunks {chunks:?}: relative L2 error {err:e} against diffusers' decode");
    }
}

#[test]
fn stream_decoder_rejects_a_chunk_of_another_size() {
    let vae = fixture_vae();
    let mut stream = vae.stream_decoder();
    stream.decode_chunk(random([1, 16, 1, 4, 4], 1)).unwrap();
    let err = stream.decode_chunk(random([1, 16, 1, 4, 2], 2)).unwrap_err();
    assert!(err.to_string().contains("[1, 16, t>0, 4, 4]"), "{err}");
    assert!(vae.decode(random([1, 8, 2, 4, 4], 3)).is_err());
}

#[test]
fn normalize_uses_latent_mean_and_std() {
    let vae = WanVaeConfig::new(4, 2, vec![1, 1], 1, vec![], vec![false], vec![0.5, -1.0], vec![2.0, 4.0]).init::<B>(&Default::default());
    // Channel 0 holds mean + std, channel 1 holds the mean: normalised to 1 and 0.
    let x = Tensor::<B, 1>::from_floats([2.5, 2.5, -1.0, -1.0], &Default::default()).reshape([1, 2, 1, 1, 2]);
    let n = vae.normalize(x.clone());
    n.to_data().assert_approx_eq::<f32>(&TensorData::new(vec![1.0f32, 1.0, 0.0, 0.0], [1, 2, 1, 1, 2]), Default::default());
    vae.denormalize(n).to_data().assert_approx_eq::<f32>(&x.to_data(), Default::default());
}

#[test]
fn config_from_fixture_meta_and_presets() {
    let config = WanVaeConfig::from_json(tiny_fixture().join("meta.json")).unwrap();
    let expected = WanVaeConfig { base_dim: 8, num_res_blocks: 1, ..WanVaeConfig::wan2_1() };
    assert_eq!(config, expected);
    let wan = WanVaeConfig::wan2_1();
    assert_eq!((wan.spatial_factor(), wan.temporal_factor()), (8, 4));
    assert_eq!((wan.latents_mean[7], wan.latents_std[8]), (1.5508, 3.2687));

    let dir = scratch_dir("config");
    let path = dir.join("config.json");
    std::fs::write(&path, r#"{"_class_name": "AutoencoderKLWan", "is_residual": true, "z_dim": 48}"#).unwrap();
    assert!(WanVaeConfig::from_json(&path).unwrap_err().to_string().contains("is_residual"));
    std::fs::write(&path, r#"{"dim_mult": [1, 2], "temperal_downsample": [false, true]}"#).unwrap();
    assert!(WanVaeConfig::from_json(&path).unwrap_err().to_string().contains("temperal_downsample"));
    std::fs::remove_dir_all(dir).unwrap();
}

/// A decoder wider than the encoder (diffusers' `decoder_base_dim`): read and written back under
/// that key, equal to `base_dim` read as no separate width, and it widens only the decoder.
#[test]
fn decoder_base_dim_widens_the_decoder_only() {
    let dir = scratch_dir("decoder-width");
    let path = dir.join("config.json");
    let wide = WanVaeConfig { decoder_base_dim: Some(16), ..WanVaeConfig::tiny_world() };
    std::fs::write(&path, wide.to_diffusers_json().to_string()).unwrap();
    assert_eq!(WanVaeConfig::from_json(&path).unwrap(), wide);
    std::fs::write(&path, r#"{"base_dim": 8, "decoder_base_dim": 8}"#).unwrap();
    assert_eq!(WanVaeConfig::from_json(&path).unwrap().decoder_base_dim, None);
    std::fs::remove_dir_all(dir).unwrap();

    let device = Default::default();
    let narrow = WanVaeConfig::tiny_world().init::<B>(&device);
    let video = Tensor::<B, 5>::random([1, 3, 5, 16, 16], Distribution::Uniform(-1.0, 1.0), &device);
    // Encoding first materialises the lazily initialised parameters, so the clone shares them.
    let a = narrow.encode_mean(video.clone()).unwrap();
    let widened = narrow.clone().with_new_decoder(16, &device);
    assert_eq!(widened.config(), &wide);
    assert_eq!(widened.encoder.num_params(), narrow.encoder.num_params());
    assert_eq!(widened.decoder.conv_out.weight.val().dims(), [3, 16, 3, 3, 3]);
    assert_eq!(narrow.decoder.conv_out.weight.val().dims(), [3, 8, 3, 3, 3]);
    let b = widened.encode_mean(video).unwrap();
    assert_eq!(a.to_data(), b.to_data(), "the encoder changed");
    assert_eq!(widened.decode(a).unwrap().dims(), [1, 3, 5, 16, 16]);
}

fn scratch_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ff-vae-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// diffusers key -> original Wan2.1 key, as `WanVAE_` in `wan/modules/vae.py` names its state dict.
fn diffusers_to_original(key: &str, num_res_blocks: usize) -> String {
    let re = |p: &str| regex::Regex::new(p).unwrap();
    let mut k = key.to_string();
    for (from, to) in [
        (r"\.norm1\.", ".residual.0."),
        (r"\.conv1\.", ".residual.2."),
        (r"\.norm2\.", ".residual.3."),
        (r"\.conv2\.", ".residual.6."),
        (r"\.conv_shortcut\.", ".shortcut."),
        (r"^quant_conv\.", "conv1."),
        (r"^post_quant_conv\.", "conv2."),
        (r"\.conv_in\.", ".conv1."),
        (r"\.norm_out\.", ".head.0."),
        (r"\.conv_out\.", ".head.2."),
        (r"\.mid_block\.resnets\.0\.", ".middle.0."),
        (r"\.mid_block\.attentions\.0\.", ".middle.1."),
        (r"\.mid_block\.resnets\.1\.", ".middle.2."),
        (r"^encoder\.down_blocks\.", "encoder.downsamples."),
    ] {
        k = re(from).replace(&k, to).into_owned();
    }
    let per_stage = num_res_blocks + 2;
    k = re(r"^decoder\.up_blocks\.(\d+)\.resnets\.(\d+)\.")
        .replace(&k, |c: &regex::Captures| {
            format!("decoder.upsamples.{}.", c[1].parse::<usize>().unwrap() * per_stage + c[2].parse::<usize>().unwrap())
        })
        .into_owned();
    re(r"^decoder\.up_blocks\.(\d+)\.upsamplers\.0\.")
        .replace(&k, |c: &regex::Captures| {
            format!("decoder.upsamples.{}.", c[1].parse::<usize>().unwrap() * per_stage + num_res_blocks + 1)
        })
        .into_owned()
}

/// Writes the module's tensors as f32 safetensors under the keys `name(path)`.
fn write_safetensors(vae: &WanVae<B>, path: &Path, name: impl Fn(&str) -> String) {
    let tensors: Vec<(String, Vec<usize>, Vec<u8>)> = vae
        .collect(None, None, false)
        .into_iter()
        .map(|s| {
            let data = s.to_data().unwrap();
            let bytes = data.to_vec::<f32>().unwrap().iter().flat_map(|v| v.to_le_bytes()).collect();
            (name(&s.full_path()), data.shape.to_vec(), bytes)
        })
        .collect();
    let views = tensors
        .iter()
        .map(|(k, shape, bytes)| (k.clone(), safetensors::tensor::TensorView::new(safetensors::Dtype::F32, shape.clone(), bytes).unwrap()));
    safetensors::serialize_to_file(views, None, path).unwrap();
}

#[test]
fn original_and_diffusers_layouts_load_the_same_weights() {
    let device = Default::default();
    // Two residual blocks per stage (as Wan2.1) and encoder attention at scale 1/2.
    let config = WanVaeConfig::new(4, 4, vec![1, 2, 2], 2, vec![0.5], vec![false, true], vec![0.0; 4], vec![1.0; 4]);
    let reference = config.init::<B>(&device);
    let dir = scratch_dir("layouts");
    let (diffusers, original) = (dir.join("diffusers.safetensors"), dir.join("Wan2.1_VAE.safetensors"));
    write_safetensors(&reference, &diffusers, load::diffusers_key);
    write_safetensors(&reference, &original, |p| diffusers_to_original(&load::diffusers_key(p), 2));
    assert!(read_tensors(&original).unwrap().contains_key("decoder.upsamples.3.resample.1.weight"));

    let video = random([1, 3, 5, 16, 16], 5);
    let want_mean = reference.encode_mean(video.clone()).unwrap();
    // Frame 0 alone, then one chunk of 4 frames halved once in time.
    assert_eq!(want_mean.dims(), [1, 4, 3, 4, 4]);
    let want_video = reference.decode(want_mean.clone()).unwrap();
    for (path, layout) in [(&diffusers, VaeLayout::Diffusers), (&original, VaeLayout::Original)] {
        let keys: Vec<String> = read_tensors(path).unwrap().into_keys().collect();
        assert_eq!(VaeLayout::detect(&keys, path).unwrap(), layout);
        let vae = WanVae::<B>::load(path, &config, &device).unwrap();
        assert!(rel_l2(vae.encode_mean(video.clone()).unwrap(), want_mean.clone()) <= 1e-6);
        assert!(rel_l2(vae.decode(want_mean.clone()).unwrap(), want_video.clone()) <= 1e-6);
    }
    let unknown = VaeLayout::detect(&["model.conv.weight".to_string()], &original).unwrap_err();
    assert!(unknown.to_string().contains("not a Wan VAE checkpoint"), "{unknown}");
    // The original file read as the diffusers layout: its keys name no module parameter.
    let err = WanVae::<B>::load_layout(&original, Some(VaeLayout::Diffusers), &config, &device).unwrap_err();
    assert!(matches!(err, crate::error::ModelError::UnexpectedKeys { .. }), "{err}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn odd_latent_sizes_keep_the_documented_shapes() {
    // The structure of Wan2.1 (and of the hidden fixture) at a small width; 24×40 gives 3×5 latents.
    let config = WanVaeConfig { base_dim: 4, ..WanVaeConfig::wan2_1() };
    let vae = config.init::<B>(&Default::default());
    let mean = vae.encode_mean(random([1, 3, 13, 24, 40], 9)).unwrap();
    assert_eq!(mean.dims(), [1, 16, 4, 3, 5]);
    let video = vae.decode(mean).unwrap();
    assert_eq!(video.dims(), [1, 3, 13, 24, 40]);
    let (lo, hi) = (video.clone().min().into_scalar(), video.max().into_scalar());
    assert!((-1.0..=1.0).contains(&lo) && (-1.0..=1.0).contains(&hi), "decode is clamped: {lo}..{hi}");
}

#[test]
fn exported_config_and_tensors_load_back_into_the_same_vae() {
    let device = Default::default();
    let mut config = WanVaeConfig::tiny_world();
    config.latents_mean[3] = 0.25;
    config.latents_std[5] = 2.5;
    let reference = config.init::<B>(&device);
    let dir = scratch_dir("export");
    let json = dir.join("config.json");
    std::fs::write(&json, serde_json::to_string(&config.to_diffusers_json()).unwrap()).unwrap();
    assert_eq!(WanVaeConfig::from_json(&json).unwrap(), config);

    let tensors = reference.diffusers_tensors().unwrap();
    assert!(tensors.iter().any(|(k, _)| k == "decoder.up_blocks.0.upsamplers.0.resample.1.weight"));
    assert!(tensors.iter().any(|(k, _)| k == "encoder.down_blocks.1.resample.1.bias"));
    let bytes: Vec<(String, Vec<usize>, Vec<u8>)> = tensors
        .iter()
        .map(|(k, d)| (k.clone(), d.shape.to_vec(), d.to_vec::<f32>().unwrap().iter().flat_map(|v| v.to_le_bytes()).collect()))
        .collect();
    let views =
        bytes.iter().map(|(k, s, b)| (k.clone(), safetensors::tensor::TensorView::new(safetensors::Dtype::F32, s.clone(), b).unwrap()));
    let weights = dir.join("diffusion_pytorch_model.safetensors");
    safetensors::serialize_to_file(views, None, &weights).unwrap();
    assert_eq!(
        VaeLayout::detect(&read_tensors(&weights).unwrap().into_keys().collect::<Vec<_>>(), &weights).unwrap(),
        VaeLayout::Diffusers
    );
    let loaded = WanVae::<B>::load(&weights, &config, &device).unwrap();
    let video = random([1, 3, 5, 16, 16], 3);
    let (mean, logvar) = reference.encode_moments(video.clone()).unwrap();
    assert_eq!(logvar.dims(), mean.dims());
    assert_eq!(mean.dims(), [1, 16, 2, 2, 2]);
    assert!(rel_l2(loaded.encode_mean(video).unwrap(), mean.clone()) <= 1e-6);
    assert!(rel_l2(loaded.decode(mean.clone()).unwrap(), reference.decode(mean).unwrap()) <= 1e-6);
    std::fs::remove_dir_all(dir).unwrap();
}

/// Phase 2's image heads: the last frame of each prefix decode, with the frame-rate layers run
/// on a window only, must be the whole decode's frame, near the start (the window reaches the
/// first latent) and far from it (it does not), bit for bit on the CPU kernels, whose every
/// output frame is one task; bad ends are refused.
#[test]
fn last_frames_are_the_whole_decodes_frames() {
    let vae = fixture_vae();
    let latents = random([1, 16, 14, 2, 2], 5);
    let whole = vae.decode(latents.clone()).unwrap();
    let values = whole.to_data().to_vec::<f32>().unwrap();
    let inside = values.iter().filter(|v| v.abs() < 0.99).count();
    assert!(inside * 2 > values.len(), "the decode saturates: {inside} of {} values inside (-1, 1)", values.len());
    let ends = [1, 2, 6, 11, 14];
    let frames = vae.decode_last_frames(latents.clone(), &ends).unwrap();
    for (&end, frame) in ends.iter().zip(frames) {
        let want = whole.clone().narrow(2, 4 * (end - 1), 1);
        let diff = (frame - want).abs().max().into_scalar();
        assert!(diff == 0.0, "end {end}: max |difference| {diff}");
    }
    for bad in [&[0, 3][..], &[3, 3], &[15]] {
        let err = vae.decode_last_frames(latents.clone(), bad).unwrap_err().to_string();
        assert!(err.contains("ascending ends"), "{bad:?}: {err}");
    }
}
