//! `flashforward encode-videos`: captioned MP4s to a latent-clip dataset (the format of
//! `ff_train::data::shards`, documented in docs/DATASET.md).
//!
//! Order of work: read the captions file (every line's video must exist), resolve the model files
//! of `--model-dir` as `generate` does and check them against each other and the frame size, then
//! open (or resume) the dataset. Videos already in its manifest are skipped, as are videos shorter
//! than `1 + 4(L − 1)` frames at 16 FPS (with a note; the container says so without decoding).
//! The rest go a shard at a time: the shard's captions through the prompt cache or umT5 (on the
//! CPU, the encoder dropped before the videos), then each video decoded, resized and
//! centre-cropped to `--height × --width`, encoded by the Wan VAE on the device (latent mean,
//! normalised) with its time-rebased crops encoded from their own frames
//! (`ff_train::data::encode_crops`), and added to the shard. Each shard and the manifest after it are written
//! atomically, so an interrupted run resumes from its last complete shard.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use ff_model::AttentionBackend;
use ff_model::text::{PromptCache, PromptEncoderFiles};
use ff_model::vae::{WanVae, WanVaeConfig};
use ff_train::data::shards::Encoders;
use ff_train::data::{CaptionedVideo, LatentClip, ShardWriter, read_captions};

use crate::backend::{BackendTask, CpuBackend, DeviceSpec, Precision, cpu_device, dispatch};
use crate::encode::{clip_latents, file_id};
use flashforward::model::files::hub_cache;
use flashforward::model::{Configs, Fallback, FileOverrides};
use flashforward::video::{FPS, FrameCount, Mp4Input};

#[derive(clap::Args)]
pub struct Args {
    /// Directory the captions file's video names are relative to.
    #[arg(long)]
    videos: PathBuf,
    /// JSON Lines: one {"video": "name.mp4", "caption": "..."} per line.
    #[arg(long)]
    captions: PathBuf,
    /// Dataset directory: created, or resumed when it holds a manifest.
    #[arg(long)]
    out: PathBuf,
    /// Frame height in pixels (a multiple of 16 for Wan2.1); each video is centre-cropped to the
    /// aspect ratio of --width × --height and resized.
    #[arg(long)]
    height: usize,
    /// Frame width in pixels (a multiple of 16 for Wan2.1).
    #[arg(long)]
    width: usize,
    /// Latent frames L per clip: the first 1 + 4(L-1) frames at 16 FPS of each video.
    #[arg(long, default_value_t = 81)]
    latents: usize,
    /// Latents L_c of each time-rebased crop stored beside the clip (Phase 1's L − Δ), one crop
    /// per start latent 1..=L − L_c, each encoded from its own frames; 0 stores none. Default:
    /// L − 10 (the paper's Δ = 10), none when L ≤ 10.
    #[arg(long)]
    crop_latents: Option<usize>,
    /// Clips per shard file.
    #[arg(long, default_value_t = 16)]
    clips_per_shard: usize,
    /// The device of the VAE: `cpu`, `cuda:N` or `wgpu:N` (one device).
    #[arg(long, default_value = "cpu")]
    devices: DeviceSpec,
    /// Float precision of the VAE (bf16 needs CUDA); latents are stored in f32.
    #[arg(long, value_enum, default_value = "f32")]
    precision: Precision,
    #[command(flatten)]
    files: FileOverrides,
    /// Prompt embedding cache (safetensors), shared with `generate`; hits skip the text encoder.
    #[arg(long)]
    prompt_cache: Option<PathBuf>,
}

/// One video to encode.
struct Job {
    video: CaptionedVideo,
    /// `[height, width]` it was coded at.
    coded: [usize; 2],
}

pub fn run(args: Args) -> Result<ExitCode> {
    if args.devices.count() != 1 {
        bail!("encode-videos runs the VAE on one device; --devices {} names {}", args.devices, args.devices.count());
    }
    let length = FrameCount::from_latents(args.latents)?;
    let crop_latents = args.crop_latents.unwrap_or(args.latents.saturating_sub(10));
    if crop_latents >= args.latents {
        bail!("--crop-latents {crop_latents} must be less than --latents {}", args.latents);
    }
    let captioned = read_captions(&args.captions, &args.videos)?;
    let files = args.files.resolve(Fallback::Hub(hub_cache().as_ref()))?;
    let configs = Configs::read(&files)?;
    configs.latent_size(args.height, args.width)?;
    configs.check_latents(args.latents)?;
    let text = PromptEncoderFiles {
        tokenizer: files.tokenizer.clone(),
        weights: files.text_encoder.clone(),
        config: configs.text.clone(),
        max_len: configs.dit.text_len,
    };
    let encoders = Encoders { vae: file_id("vae", &files.vae)?, text: text.id()? };
    let writer = ShardWriter::open(&args.out, encoders, args.clips_per_shard)?;
    let crops_of = |c: &ff_train::data::shards::ClipEntry| c.crops_shape.as_ref().map_or(0, |s| s[2]);
    if let Some(clip) = writer.manifest().clips.iter().find(|c| crops_of(c) != crop_latents) {
        bail!(
            "{} holds clips with crops of {} latents ({}); this run asks for --crop-latents {crop_latents}: write to another --out",
            args.out.display(),
            crops_of(clip),
            clip.source
        );
    }
    if let Some(clip) = writer.manifest().clips.iter().find(|c| c.latents != args.latents || c.frame_size != [args.height, args.width]) {
        bail!(
            "{} holds clips of L = {} at {}x{} px ({}); this run asks for L = {} at {}x{}: write to another --out",
            args.out.display(),
            clip.latents,
            clip.frame_size[1],
            clip.frame_size[0],
            clip.source,
            args.latents,
            args.width,
            args.height
        );
    }

    let total = captioned.len();
    let mut jobs = Vec::new();
    let (mut done, mut short) = (0, 0);
    for video in captioned {
        if writer.contains(&video.video, &video.caption) {
            done += 1;
            continue;
        }
        let input = Mp4Input::open(&video.path)?;
        let frames = input.frames_at_fps();
        if frames < length.frames {
            eprintln!(
                "note: {}: {frames} frames at {FPS} FPS, L = {} needs {}; skipped",
                video.path.display(),
                args.latents,
                length.frames
            );
            short += 1;
            continue;
        }
        let (width, height) = input.size();
        jobs.push(Job { video, coded: [height, width] });
    }
    eprintln!(
        "{total} captioned videos: {done} already in {}, {short} too short, {} to encode ({} frames each at {}x{} px)",
        args.out.display(),
        jobs.len(),
        length.frames,
        args.width,
        args.height
    );
    let task = Encode {
        jobs,
        writer,
        text,
        prompt_cache: args.prompt_cache.clone(),
        vae: files.vae.clone(),
        vae_config: configs.vae.clone(),
        frames: length.frames,
        size: [args.height, args.width],
        crop_latents,
    };
    let added = dispatch(&args.devices, args.precision, task)?;
    println!("{}: {} clips ({added} added)", args.out.display(), done + added);
    Ok(ExitCode::SUCCESS)
}

/// The encoding on the selected backend; returns the number of clips added.
struct Encode {
    jobs: Vec<Job>,
    writer: ShardWriter,
    text: PromptEncoderFiles,
    prompt_cache: Option<PathBuf>,
    vae: PathBuf,
    vae_config: WanVaeConfig,
    /// RGB frames per clip.
    frames: usize,
    /// `[height, width]` of the stored frames.
    size: [usize; 2],
    /// Latents of each stored crop (0: none).
    crop_latents: usize,
}

impl BackendTask for Encode {
    type Output = usize;

    fn run<B: AttentionBackend>(mut self, devices: Vec<B::Device>) -> Result<usize> {
        let device = &devices[0];
        let vae = WanVae::<B>::load(&self.vae, &self.vae_config, device)
            .with_context(|| format!("cannot load the VAE from {}", self.vae.display()))?;
        let mut cache = self.prompt_cache.as_deref().map(PromptCache::open).transpose()?;
        let [height, width] = self.size;
        let total = self.jobs.len();
        let mut encoded = 0;
        for jobs in self.jobs.chunks(self.writer.clips_per_shard()) {
            let captions: Vec<&str> = jobs.iter().map(|j| j.video.caption.as_str()).collect();
            let prompts = self
                .text
                .embed::<CpuBackend>(&captions, cache.as_mut(), &cpu_device())
                .with_context(|| format!("cannot encode captions with {}", self.text.weights.display()))?;
            for (job, prompt) in jobs.iter().zip(prompts) {
                let video = &job.video;
                if prompt.truncated {
                    let (n, max) = (prompt.original_len, self.text.max_len);
                    eprintln!("note: the caption of {} (line {}) is {n} tokens; cut to {max}", video.video, video.line);
                }
                let frames = Mp4Input::open(&video.path)?.read_frames(self.frames, width, height)?;
                let (latents, crops) = clip_latents(&vae, &frames, self.crop_latents, device)?;
                let [channels, l, h, w] = latents.shape[..] else { unreachable!("clip_latents returns [C, L, h, w]") };
                let clip = LatentClip { latents, prompt: prompt.data, crops, caption: video.caption.clone() };
                self.writer.push(&video.video, self.size, &clip)?;
                let [ch, cw] = job.coded;
                encoded += 1;
                eprintln!("[{encoded}/{total}] {} ({cw}x{ch} px) -> latents [{channels}, {l}, {h}, {w}]", video.path.display());
            }
        }
        self.writer.finish()?;
        Ok(encoded)
    }
}
