//! `flashforward world latents --model-dir DIR --out DATA --clips N [--seconds S] [--seed S]`:
//! a latent-clip dataset (the `ff_train::data::shards` format, docs/DATASET.md) straight from the
//! procedural generator, without the MP4 round trip of `world clips` + `encode-videos`.
//!
//! Clip `i` is the scene of `world clips`' clip `i` of the same seed (same captions, same motion), its
//! frames rendered and encoded by DIR's VAE (latent mean, normalised), its caption by DIR's text
//! encoder; with `--start-within` a clip is a window of its scene from a later start. Each
//! clip's source name is `scene-SEED-NNNNN` (`…-from-F` for a window from frame F): a rerun skips
//! the clips already in DATA, and each shard and the manifest after it are written atomically, so
//! an interrupted run resumes from its last complete shard. A dataset only grows with the same
//! model files.

use super::scenes::Scenes;
use crate::backend::{BackendTask, CpuBackend, DeviceSpec, Precision, cpu_device, dispatch};
use crate::encode::{clip_latents, file_id};
use crate::world_dir::WorldDir;
use anyhow::{Context, Result, bail};
use ff_model::AttentionBackend;
use ff_model::text::PromptEncoderFiles;
use ff_model::vae::{WanVae, WanVaeConfig};
use ff_train::data::shards::Encoders;
use ff_train::data::{LatentClip, ShardWriter};
use ff_world::render::{frames_for_seconds, render_from};
use ff_world::{FPS, Scene};
use flashforward::video::Frame;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Small-world model directory with `vae/`, `text_encoder/` and `tokenizer/`.
    #[arg(long)]
    pub model_dir: PathBuf,
    /// Dataset directory: created, or resumed when it holds a manifest.
    #[arg(long)]
    pub out: PathBuf,
    #[command(flatten)]
    pub scenes: Scenes,
    /// Prompt tokens the embeddings may hold (the teacher's `text_len`).
    #[arg(long, default_value_t = 32)]
    pub text_len: usize,
    /// Latents of each time-rebased crop stored beside the clip (Phase 1's L − Δ), one crop per
    /// start latent 1..=L − L_c, each encoded from its own frames (docs/DATASET.md); 0 (the
    /// default here) stores none.
    #[arg(long, default_value_t = 0)]
    pub crop_latents: usize,
    /// Clips per shard file.
    #[arg(long, default_value_t = 64)]
    pub clips_per_shard: usize,
    /// The device of the VAE: `cpu`, `cuda:N` or `wgpu:N` (one device).
    #[arg(long, default_value = "cpu")]
    pub devices: DeviceSpec,
}

pub fn run(args: Args) -> Result<ExitCode> {
    if args.devices.count() != 1 {
        bail!("world latents runs the VAE on one device; --devices names {}", args.devices.count());
    }
    let dir = WorldDir(args.model_dir.clone());
    let (vae, vae_config) = dir.vae()?;
    let text = dir.text(args.text_len)?;
    let encoders = Encoders { vae: file_id("vae", &vae)?, text: text.id()? };
    let writer = ShardWriter::open(&args.out, encoders, args.clips_per_shard)?;
    // A window's name carries its start frame, so that it is never taken for its scene's opening.
    let scenes: Vec<(String, Scene, f64)> = (0..args.scenes.clips)
        .map(|i| {
            let start = args.scenes.start(i);
            let name = format!("scene-{}-{i:05}", args.scenes.seed);
            let name = if start > 0.0 { format!("{name}-from-{}", (start * FPS as f64).round()) } else { name };
            (name, args.scenes.scene(i), start)
        })
        .filter(|(name, scene, _)| !writer.contains(name, &scene.caption()))
        .collect();
    let kept = args.scenes.clips - scenes.len();
    eprintln!("{} clips: {kept} already in {}, {} to encode", args.scenes.clips, args.out.display(), scenes.len());
    let added = match scenes.is_empty() {
        true => 0,
        false => dispatch(
            &args.devices,
            Precision::F32,
            Encode {
                scenes,
                writer,
                text,
                vae,
                vae_config,
                frames: frames_for_seconds(args.scenes.seconds),
                crop_latents: args.crop_latents,
            },
        )?,
    };
    println!("{}: {} clips ({added} added)", args.out.display(), kept + added);
    Ok(ExitCode::SUCCESS)
}

struct Encode {
    scenes: Vec<(String, Scene, f64)>,
    writer: ShardWriter,
    text: PromptEncoderFiles,
    vae: PathBuf,
    vae_config: WanVaeConfig,
    frames: usize,
    /// Latents of each stored crop (0: none).
    crop_latents: usize,
}

impl BackendTask for Encode {
    type Output = usize;

    fn run<B: AttentionBackend>(mut self, devices: Vec<B::Device>) -> Result<usize> {
        let device = &devices[0];
        let vae = WanVae::<B>::load(&self.vae, &self.vae_config, device)
            .with_context(|| format!("cannot load the VAE from {}", self.vae.display()))?;
        let total = self.scenes.len();
        let mut encoded = 0;
        for group in self.scenes.chunks(self.writer.clips_per_shard()) {
            let captions: Vec<String> = group.iter().map(|(_, s, _)| s.caption()).collect();
            let refs: Vec<&str> = captions.iter().map(String::as_str).collect();
            let prompts = self.text.embed::<CpuBackend>(&refs, None, &cpu_device())?;
            for ((name, scene, start), (caption, prompt)) in group.iter().zip(captions.into_iter().zip(prompts)) {
                let clip = render_from(scene, *start, self.frames);
                let frames: Vec<Frame> = clip
                    .frames
                    .into_iter()
                    .map(|rgb| flashforward::video::frame(clip.width, clip.height, rgb))
                    .collect::<flashforward::Result<_>>()?;
                let (latents, crops) = clip_latents(&vae, &frames, self.crop_latents, device)?;
                let [c, l, h, w] = latents.shape[..] else { unreachable!("clip_latents returns [C, L, h, w]") };
                self.writer.push(name, [clip.height, clip.width], &LatentClip { latents, prompt: prompt.data, crops, caption })?;
                encoded += 1;
                if encoded % 16 == 0 || encoded == total {
                    eprintln!("[{encoded}/{total}] latents [{c}, {l}, {h}, {w}]");
                }
            }
        }
        self.writer.finish()?;
        Ok(encoded)
    }
}
