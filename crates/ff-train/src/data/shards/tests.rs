use std::fs;
use std::path::Path;

use burn::tensor::TensorData;

use super::*;
use crate::TrainError;
use crate::data::test_dir::TestDir;
use crate::data::{ClipSource, LatentClip};

fn encoders() -> Encoders {
    Encoders { vae: "vae:tiny".into(), text: "umt5:tiny".into() }
}

/// Clip `i`: latents `[16, l, 2, 3]` and a prompt of `2 + i % 3` tokens, every value distinct.
fn clip(i: usize, l: usize) -> LatentClip {
    let values = |n: usize, offset: f32| (0..n).map(|k| offset + k as f32 * 0.5).collect::<Vec<f32>>();
    let tokens = 2 + i % 3;
    LatentClip {
        latents: TensorData::new(values(16 * l * 6, 1000.0 * i as f32), [16, l, 2, 3]),
        prompt: TensorData::new(values(tokens * 4, -1000.0 * i as f32), [tokens, 4]),
        crops: None,
        caption: format!("caption {i}"),
    }
}

fn writer_for(dir: &Path) -> ShardWriter {
    ShardWriter::open(dir, encoders(), 2).unwrap()
}

fn write(dir: &Path, range: std::ops::Range<usize>, per_shard: usize) -> Manifest {
    let mut writer = ShardWriter::open(dir, encoders(), per_shard).unwrap();
    for i in range {
        writer.push(&format!("v{i}.mp4"), [16, 24], &clip(i, 3)).unwrap();
    }
    writer.finish().unwrap()
}

fn assert_same(a: &LatentClip, b: &LatentClip) {
    assert_eq!(a.latents, b.latents);
    assert_eq!(a.prompt, b.prompt);
    assert_eq!(a.crops, b.crops);
    assert_eq!(a.caption, b.caption);
}

fn edit_manifest(dir: &Path, edit: impl FnOnce(&mut Manifest)) {
    let mut manifest = Manifest::load(dir).unwrap();
    edit(&mut manifest);
    manifest.save(dir).unwrap();
}

#[test]
fn clips_round_trip_through_shards() {
    let dir = TestDir::new("round_trip");
    let manifest = write(dir.path(), 0..5, 2);
    let shards: Vec<&str> = manifest.clips.iter().map(|c| c.shard.as_str()).collect();
    assert_eq!(
        shards,
        [
            "shard-00000.safetensors",
            "shard-00000.safetensors",
            "shard-00001.safetensors",
            "shard-00001.safetensors",
            "shard-00002.safetensors"
        ]
    );
    let entry = &manifest.clips[4];
    assert_eq!((entry.source.as_str(), entry.latents, entry.frame_size), ("v4.mp4", 3, [16, 24]));
    assert_eq!((entry.latents_shape.as_slice(), entry.prompt_shape.as_slice()), (&[16, 3, 2, 3][..], &[3, 4][..]));
    let data = ShardDataset::open(dir.path()).unwrap();
    assert_eq!(data.len(), 5);
    assert_eq!(data.manifest(), &manifest);
    for i in [3, 0, 4, 1, 2] {
        assert_same(&data.get(i).unwrap(), &clip(i, 3));
    }
    assert!(matches!(data.get(5), Err(TrainError::Data { .. })));
    // Only the shards and the manifest are left: no temp files.
    let mut files: Vec<String> = fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    files.sort();
    assert_eq!(files, ["manifest.json", "shard-00000.safetensors", "shard-00001.safetensors", "shard-00002.safetensors"]);
}

#[test]
fn an_interrupted_run_keeps_its_full_shards_and_resumes() {
    let dir = TestDir::new("resume");
    let mut writer = ShardWriter::open(dir.path(), encoders(), 2).unwrap();
    for i in 0..3 {
        writer.push(&format!("v{i}.mp4"), [16, 24], &clip(i, 3)).unwrap();
    }
    assert!(writer.contains("v2.mp4", "caption 2"), "pending clips count as known");
    drop(writer); // killed: clip 2 was only buffered
    assert_eq!(ShardDataset::open(dir.path()).unwrap().len(), 2);
    // A shard renamed into place just before the kill, but not yet in the manifest.
    fs::write(dir.path().join("shard-00001.safetensors"), b"stray").unwrap();

    let mut writer = ShardWriter::open(dir.path(), encoders(), 2).unwrap();
    assert!(writer.contains("v1.mp4", "caption 1"));
    assert!(!writer.contains("v2.mp4", "caption 2"));
    assert!(!writer.contains("v1.mp4", "another caption"));
    for i in 2..5 {
        writer.push(&format!("v{i}.mp4"), [16, 24], &clip(i, 3)).unwrap();
    }
    writer.finish().unwrap();
    let data = ShardDataset::open(dir.path()).unwrap();
    assert_eq!(data.len(), 5);
    for i in 0..5 {
        assert_same(&data.get(i).unwrap(), &clip(i, 3));
    }

    // A clip already in the dataset is not added twice.
    let err = writer_for(dir.path()).push("v1.mp4", [16, 24], &clip(1, 3)).unwrap_err().to_string();
    assert!(err.contains("v1.mp4 with caption \"caption 1\" is already in the dataset"), "{err}");

    // Another model cannot add to this dataset.
    let other = Encoders { vae: "vae:other".into(), ..encoders() };
    let err = ShardWriter::open(dir.path(), other, 2).err().unwrap().to_string();
    assert!(err.contains("manifest.json") && err.contains("vae:other") && err.contains("vae:tiny"), "{err}");
}

#[test]
fn a_missing_shard_is_named() {
    let dir = TestDir::new("missing_shard");
    write(dir.path(), 0..3, 2);
    fs::remove_file(dir.path().join("shard-00001.safetensors")).unwrap();
    let err = ShardDataset::open(dir.path()).unwrap_err();
    match &err {
        TrainError::MissingShard { shard, clip, video, .. } => {
            assert_eq!((shard.as_path(), *clip, video.as_str()), (dir.path().join("shard-00001.safetensors").as_path(), 2, "v2.mp4"));
        }
        other => panic!("expected MissingShard, got {other:?}"),
    }
    assert!(err.to_string().contains("shard-00001.safetensors of clip 2 (v2.mp4) does not exist"), "{err}");
}

#[test]
fn a_truncated_shard_is_named() {
    let dir = TestDir::new("truncated");
    write(dir.path(), 0..2, 2);
    let shard = dir.path().join("shard-00000.safetensors");
    let bytes = fs::read(&shard).unwrap();
    fs::write(&shard, &bytes[..bytes.len() - 4]).unwrap();
    let err = ShardDataset::open(dir.path()).unwrap_err();
    assert!(matches!(err, TrainError::Data { .. }) && err.to_string().contains("(truncated shard)"), "{err}");
    fs::write(&shard, &bytes[..6]).unwrap();
    let err = ShardDataset::open(dir.path()).unwrap_err();
    assert!(err.to_string().contains("shard-00000.safetensors"), "{err}");
}

#[test]
fn a_shape_mismatch_is_named() {
    let dir = TestDir::new("shape");
    write(dir.path(), 0..2, 2);
    edit_manifest(dir.path(), |m| m.clips[1].latents_shape = vec![16, 3, 3, 2]);
    let err = ShardDataset::open(dir.path()).unwrap_err();
    assert!(
        matches!(&err, TrainError::ShapeMismatch { key, expected, found, .. }
            if key == "clip000001.latents" && expected == &[16, 3, 3, 2] && found == &[16, 3, 2, 3]),
        "{err:?}"
    );
    assert!(err.to_string().contains("shard-00000.safetensors: tensor 'clip000001.latents' has shape [16, 3, 2, 3]"), "{err}");
    // The manifest's own L must agree with its latents shape.
    edit_manifest(dir.path(), |m| m.clips[1].latents_shape = vec![16, 4, 2, 3]);
    let err = ShardDataset::open(dir.path()).unwrap_err();
    assert!(matches!(err, TrainError::Manifest { .. }) && err.to_string().contains("is not [channels, 3, h, w]"), "{err}");
}

#[test]
fn a_manifest_key_missing_from_its_shard_is_named() {
    let dir = TestDir::new("key");
    write(dir.path(), 0..2, 2);
    edit_manifest(dir.path(), |m| m.clips[0].prompt_key = "clip000009.prompt".into());
    let err = ShardDataset::open(dir.path()).unwrap_err();
    assert!(matches!(&err, TrainError::MissingKey { key, clip: 0, .. } if key == "clip000009.prompt"), "{err:?}");
    assert!(err.to_string().contains("no tensor 'clip000009.prompt' (clip 0, v0.mp4"), "{err}");
}

#[test]
fn bad_manifests_are_named() {
    let dir = TestDir::new("manifest");
    let err = ShardDataset::open(dir.path()).unwrap_err();
    assert!(matches!(&err, TrainError::Io { path, .. } if path.ends_with("manifest.json")), "{err}");
    write(dir.path(), 0..1, 2);
    let path = dir.path().join(MANIFEST);
    let text = fs::read_to_string(&path).unwrap();
    for (bad, needle) in [
        (text.replace(FORMAT, "other/9"), "format is \"other/9\""),
        (text.replace("\"latents\": 3", "\"frames\": 3"), "unknown field `frames`"),
        (text.replace("\"shard-00000.safetensors\"", "\"../x.safetensors\""), "is not a file name"),
    ] {
        fs::write(&path, bad).unwrap();
        let err = ShardDataset::open(dir.path()).unwrap_err();
        assert!(matches!(err, TrainError::Manifest { .. }) && err.to_string().contains(needle), "{needle}: {err}");
    }
}

#[test]
fn crops_round_trip_and_must_fit_their_clip() {
    let dir = TestDir::new("crops");
    let mut writer = writer_for(dir.path());
    let with_crops = |i: usize| {
        let crops = (0..2 * 16 * 2 * 6).map(|k| i as f32 + k as f32 * 0.25).collect::<Vec<f32>>();
        LatentClip { crops: Some(TensorData::new(crops, [2, 16, 2, 2, 3])), ..clip(i, 4) }
    };
    let (a, b) = (with_crops(0), clip(1, 4));
    writer.push("a.mp4", [16, 24], &a).unwrap();
    writer.push("b.mp4", [16, 24], &b).unwrap();
    let bad = LatentClip { crops: Some(TensorData::new(vec![0f32; 16 * 3 * 6], [1, 16, 3, 2, 3])), ..clip(2, 5) };
    let err = writer.push("c.mp4", [16, 24], &bad).unwrap_err().to_string();
    assert!(err.contains("c.mp4") && err.contains("[1, 16, 3, 2, 3]"), "{err}");
    let manifest = writer.finish().unwrap();
    assert_eq!(manifest.clips[0].crops_shape, Some(vec![2, 16, 2, 2, 3]));
    assert_eq!((manifest.clips[1].crops_key.as_ref(), manifest.clips[1].crops_shape.as_ref()), (None, None));
    let data = ShardDataset::open(dir.path()).unwrap();
    assert_same(&data.get(0).unwrap(), &a);
    assert_same(&data.get(1).unwrap(), &b);
    edit_manifest(dir.path(), |m| m.clips[0].crops_shape = Some(vec![3, 16, 2, 2, 3]));
    let err = ShardDataset::open(dir.path()).unwrap_err().to_string();
    assert!(err.contains("crops_shape [3, 16, 2, 2, 3]"), "{err}");
}
