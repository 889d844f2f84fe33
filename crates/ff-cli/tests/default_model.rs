//! `generate` with no model flags reads the default model: here a stand-in built from the
//! reference fixtures' tiny random models in the layout of `models/world/` (an exported student:
//! `transformer/{config.json, planner/, renderer/, flashforward.json}`), found through
//! `$FF_MODEL_DIR` exactly as the repository's folder is found without it. The student's
//! manifest sets the defaults (frame size, stage count and contract), the same seed gives the
//! same MP4 bytes, a prompt outside the small world's vocabulary is refused with what the model
//! knows, and a folder without a student says how to get one.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

mod common;
use common::{Scratch, fixture_config, fixtures, tokenizer_json, write, write_umt5};

const PROMPT: &str = "a red circle bounces on a black background";

/// The stand-in default model: the fixture DiT as both roles, the fixture VAE, a tiny umT5.
fn world_dir(root: &Path) -> PathBuf {
    let world = root.join("world");
    write(&world.join("vae/config.json"), fixture_config("wan_vae_tiny").to_string());
    fs::copy(fixtures().join("wan_vae_tiny/weights_diffusers.safetensors"), world.join("vae/diffusion_pytorch_model.safetensors")).unwrap();
    write_umt5(&world.join("text_encoder"));
    write(&world.join("tokenizer/tokenizer.json"), tokenizer_json());
    let student = world.join("transformer");
    write(&student.join("config.json"), fixture_config("wan_dit_tiny").to_string());
    for (role, layout) in [("planner", "diffusers"), ("renderer", "wan")] {
        let weights = fixtures().join(format!("wan_dit_tiny/weights_{layout}.safetensors"));
        write(&student.join(role).join("diffusion_pytorch_model.safetensors"), fs::read(weights).unwrap());
    }
    let manifest = serde_json::json!({
        "contract": {
            "latents": 81, "stages": 2, "anchor_stride": 4, "anchor_window": 3, "chunk": 2, "planner_block": 2, "history": 2,
            "planner_context": 4, "context_window": 21, "shift": 5.0, "use_anchors": true
        },
        "frame_size": [32, 32],
        "vocabulary": "small-world"
    });
    write(&student.join("flashforward.json"), manifest.to_string());
    world
}

/// `generate --prompt P --seconds 2 --out OUT` plus `extra`, with `$FF_MODEL_DIR` = `model`.
fn generate(model: &Path, prompt: &str, out: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["generate", "--prompt", prompt, "--seconds", "2", "--out", out.to_str().unwrap()];
    args.extend(extra);
    let output = Command::new(env!("CARGO_BIN_EXE_flashforward")).args(&args).env("FF_MODEL_DIR", model).output().unwrap();
    eprintln!("{}", String::from_utf8_lossy(&output.stderr));
    output
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn the_default_model_runs_at_its_students_defaults_and_the_same_seed_gives_the_same_mp4() {
    let scratch = Scratch::new("default-model");
    let world = world_dir(&scratch.0);
    let [a, b, c] = ["a.mp4", "b.mp4", "c.mp4"].map(|f| scratch.0.join(f));
    let first = generate(&world, PROMPT, &a, &[]);
    let log = stderr(&first);
    assert!(first.status.success(), "{log}");
    assert!(log.contains("9 latents (33 frames"), "2 s at 16 FPS: {log}");
    assert!(log.contains("32x32 px") && log.contains("schedule flashforward (S = 2, Δ = 4"), "the student's defaults: {log}");
    assert!(generate(&world, PROMPT, &b, &[]).status.success());
    let bytes = fs::read(&a).unwrap();
    assert!(bytes.len() > 1000, "an MP4 of 33 frames: {} bytes", bytes.len());
    assert_eq!(bytes, fs::read(&b).unwrap(), "the default seed gives the same MP4 bytes");
    assert!(generate(&world, PROMPT, &c, &["--seed", "1"]).status.success());
    assert_ne!(bytes, fs::read(&c).unwrap(), "another seed draws another video");
}

#[test]
fn prompts_outside_the_small_world_are_refused_with_what_the_model_knows() {
    let scratch = Scratch::new("default-model-vocab");
    let world = world_dir(&scratch.0);
    let out = scratch.0.join("dragon.mp4");
    let output = generate(&world, "a purple dragon flies", &out, &[]);
    let err = stderr(&output);
    assert!(!output.status.success() && !out.exists(), "{err}");
    assert!(err.contains("unknown words 'dragon', 'flies'"), "{err}");
    for known in
        ["shapes: circle, square, triangle", "colours: red, green", "backgrounds: black, white, gray, dark blue", "motions: moves left"]
    {
        assert!(err.contains(known), "the error lists {known:?}: {err}");
    }
}

#[test]
fn a_default_folder_without_a_student_says_how_to_get_one() {
    let scratch = Scratch::new("default-model-untrained");
    let world = world_dir(&scratch.0);
    fs::remove_dir_all(world.join("transformer")).unwrap();
    let output = generate(&world, PROMPT, &scratch.0.join("x.mp4"), &[]);
    let err = stderr(&output);
    assert!(!output.status.success(), "{err}");
    assert!(err.contains(&format!("dit: not found in the default model {}", world.display())), "{err}");
    assert!(err.contains("scripts/train-default.sh") && err.contains("--hub"), "{err}");
    assert!(!err.contains("vae:") && !err.contains("tokenizer:"), "only the student is missing: {err}");
}

/// `--negative-prompt` replaces the empty prompt that guided planner steps steer away from: it
/// changes the video, is read in the student's vocabulary (an unknown word is refused and named),
/// and a run without guided steps refuses it rather than ignore it.
#[test]
fn a_negative_prompt_steers_the_guided_planner() {
    let scratch = Scratch::new("default-model-negative");
    let world = world_dir(&scratch.0);
    let guided = ["--planner-steps", "2", "--planner-guidance", "3"];
    let negative = "a blue square moves left on a white background";
    let [plain, steered, again] = ["plain.mp4", "steered.mp4", "again.mp4"].map(|f| scratch.0.join(f));
    assert!(generate(&world, PROMPT, &plain, &guided).status.success());
    assert!(generate(&world, PROMPT, &steered, &[&guided[..], &["--negative-prompt", negative]].concat()).status.success());
    assert!(generate(&world, PROMPT, &again, &[&guided[..], &["--negative-prompt", negative]].concat()).status.success());
    let bytes = fs::read(&steered).unwrap();
    assert_ne!(fs::read(&plain).unwrap(), bytes, "the negative prompt is what guidance contrasts with");
    assert_eq!(fs::read(&again).unwrap(), bytes, "and it is deterministic");

    let out = scratch.0.join("dragon.mp4");
    let output = generate(&world, PROMPT, &out, &[&guided[..], &["--negative-prompt", "a purple dragon"]].concat());
    let err = stderr(&output);
    assert!(!output.status.success() && !out.exists(), "{err}");
    assert!(err.contains("--negative-prompt") && err.contains("'dragon'"), "{err}");

    let output = generate(&world, PROMPT, &out, &["--negative-prompt", negative]);
    let err = stderr(&output);
    assert!(!output.status.success() && !out.exists(), "{err}");
    assert!(err.contains("--negative-prompt steers guided sampling"), "{err}");
}

#[test]
fn the_library_writes_the_same_mp4_as_the_cli() {
    let scratch = Scratch::new("library-mp4");
    let world = world_dir(&scratch.0);
    let cli = scratch.0.join("cli.mp4");
    assert!(generate(&world, PROMPT, &cli, &["--seed", "3"]).status.success());
    let pipe = flashforward::Pipeline::<flashforward::Cpu>::load(&world, &Default::default()).unwrap();
    let video = pipe.generate(&flashforward::Request::new(PROMPT).seconds(2.0).seed(3)).unwrap();
    assert_eq!(video.fps(), 16);
    assert_eq!(video.frames().len(), video.report().plan.length.frames);
    let library = video.write_mp4(scratch.0.join("library.mp4")).unwrap();
    assert!(fs::read(&library).unwrap() == fs::read(&cli).unwrap(), "the library's MP4 is byte-identical to the CLI's");
    let err = video.write_mp4(scratch.0.join("library.gif")).unwrap_err().to_string();
    assert!(err.contains("a .mp4 file name is expected"), "{err}");
}

/// Prompt switching (`Request::switch`, `generate --switch`, `LiveSwitch`): deterministic per
/// seed, a switch to the same prompt changes no byte, the same video on every executor, each
/// chunk says which prompt it was made under, and a switch prompt is read like the main prompt.
mod switching {
    use super::*;
    use flashforward::{Carry, Executor, LiveSwitch, Pipeline, Request, SwitchPolicy};
    use std::ops::ControlFlow;

    const OTHER: &str = "a blue square moves left on a black background";

    /// 2 s (9 latents, chunks of 2): a switch at 1 s lands on boundary 4 (frame 13, 0.81 s),
    /// nearer frame 16 than boundary 6 (frame 21).
    fn request(seed: u64) -> Request {
        Request::new(PROMPT).seconds(2.0).seed(seed)
    }

    /// The frames and the prompt of every chunk.
    fn run(pipe: &Pipeline<flashforward::Cpu>, request: &Request) -> (Vec<flashforward::Frame>, Vec<String>) {
        let (mut frames, mut prompts) = (Vec::new(), Vec::new());
        pipe.generate_with(request, |chunk| {
            frames.extend_from_slice(chunk.frames);
            prompts.extend(std::iter::repeat_n(chunk.prompt.to_string(), chunk.latents.len()));
            ControlFlow::Continue(())
        })
        .unwrap();
        (frames, prompts)
    }

    #[test]
    fn a_switch_is_deterministic_the_same_on_every_executor_and_a_no_op_to_the_same_prompt() {
        let scratch = Scratch::new("switch-library");
        let pipe = Pipeline::<flashforward::Cpu>::load(world_dir(&scratch.0), &Default::default()).unwrap();
        let (plain, plain_prompts) = run(&pipe, &request(3));
        assert!(plain_prompts.iter().all(|p| p == PROMPT), "{plain_prompts:?}");
        let (same, _) = run(&pipe, &request(3).switch(1.0, PROMPT));
        assert!(same == plain, "a switch to the same prompt changes nothing");
        let (same_words, _) = run(&pipe, &request(3).switch(1.0, "A red ball bounces."));
        assert!(same_words == plain, "nor does one the student reads as the same caption");
        let (switched, prompts) = run(&pipe, &request(3).switch(1.0, OTHER));
        assert!(switched != plain, "the switch changes the video");
        let want: Vec<&str> = (0..9).map(|l| if l < 4 { PROMPT } else { OTHER }).collect();
        assert_eq!(prompts, want, "latents 0-3 under the prompt, 4-8 under the switch's");
        let video = pipe.generate(&request(3).switch(1.0, OTHER)).unwrap();
        assert!(video.frames() == switched.as_slice(), "deterministic per seed");
        let segments: Vec<(usize, &str)> = video.report().segments.iter().map(|s| (s.first_latent, s.prompt.as_str())).collect();
        assert_eq!(segments, [(0, PROMPT), (4, OTHER)]);
        assert_ne!(run(&pipe, &request(4).switch(1.0, OTHER)).0, switched, "another seed, another video");
        for executor in [Executor::Serial, Executor::Wavefront, Executor::Streaming, Executor::Batched] {
            let (frames, _) = run(&pipe, &request(3).switch(1.0, OTHER).executor(executor));
            assert!(frames == switched, "{executor}: the same frames as the default executor");
        }
        // Re-caching or keeping the K/V before the switch (the default drops it): other videos, each the same on every
        // executor, and nothing changes for a switch to the same prompt.
        let policies = [Carry::Recache, Carry::Keep].map(|c| SwitchPolicy { anchors: c, history: c });
        let mut seen = vec![switched.clone()];
        for policy in policies.into_iter().chain([SwitchPolicy { anchors: Carry::Recache, history: Carry::Keep }]) {
            let (made, _) = run(&pipe, &request(3).switch(1.0, OTHER).switch_policy(policy));
            assert!(!seen.contains(&made), "{policy:?} changes what the chunks after the switch read");
            for executor in [Executor::Wavefront, Executor::Streaming, Executor::Batched] {
                let (frames, _) = run(&pipe, &request(3).switch(1.0, OTHER).switch_policy(policy).executor(executor));
                assert!(frames == made, "{policy:?}, {executor}: the same frames as serial");
            }
            assert!(run(&pipe, &request(3).switch(1.0, PROMPT).switch_policy(policy)).0 == plain, "{policy:?}");
            seen.push(made);
        }
        // Two switches, the second back to the first prompt.
        let (twice, prompts) = run(&pipe, &request(3).switch(1.0, OTHER).switch(1.5, PROMPT).executor(Executor::Batched));
        let (twice_serial, _) = run(&pipe, &request(3).switch(1.0, OTHER).switch(1.5, PROMPT).executor(Executor::Serial));
        assert!(twice == twice_serial, "mixed prompts in one batched wave");
        assert_eq!(prompts[4..6], [OTHER, OTHER]);
        assert_eq!(prompts[6..], [PROMPT, PROMPT, PROMPT]);
    }

    /// FlashForward-CP's planner shards read and publish under the switch's prompts as a whole
    /// planner forward does: the same frames as one device, under every carry policy.
    #[test]
    fn a_switch_with_the_planner_sharded_makes_the_single_device_video() {
        let scratch = Scratch::new("switch-cp");
        let dir = world_dir(&scratch.0);
        let one = Pipeline::<flashforward::Cpu>::load(&dir, &Default::default()).unwrap();
        let devices = [Default::default(), Default::default()];
        let two = Pipeline::<flashforward::Cpu>::load_on(flashforward::Model::open_dir(&dir).unwrap(), &devices).unwrap();
        for c in [Carry::Drop, Carry::Recache, Carry::Keep] {
            let policy = SwitchPolicy { anchors: c, history: c };
            let switched = request(3).switch(1.0, OTHER).switch_policy(policy);
            let (want, _) = run(&one, &switched.clone().executor(Executor::Serial));
            let (cp, _) = run(&two, &switched.planner_cp(true));
            assert!(cp == want, "{policy:?}: the sharded planner's video equals one device's");
        }
    }

    #[test]
    fn a_live_switch_applies_at_a_chunk_boundary_and_a_bad_one_fails_with_the_word() {
        let scratch = Scratch::new("switch-live");
        let pipe = Pipeline::<flashforward::Cpu>::load(world_dir(&scratch.0), &Default::default()).unwrap();
        // Taken before the first forward: the boundary is latent 0, the whole video is the new
        // prompt's, byte for byte.
        let live = LiveSwitch::new();
        live.switch_to(OTHER);
        let (early, prompts) = run(&pipe, &request(3).live_switch(live));
        assert!(prompts.iter().all(|p| p == OTHER), "{prompts:?}");
        assert!(early == run(&pipe, &Request::new(OTHER).seconds(2.0).seed(3)).0, "the same as the new prompt alone");
        // Switched from the callback: later chunks only, and never back.
        for executor in [Executor::Serial, Executor::Streaming] {
            let live = LiveSwitch::new();
            let mut prompts = Vec::new();
            let report = pipe
                .generate_with(&request(3).live_switch(live.clone()).executor(executor), |chunk| {
                    prompts.push(chunk.prompt.to_string());
                    live.switch_to(OTHER);
                    ControlFlow::Continue(())
                })
                .unwrap();
            assert_eq!(prompts[0], PROMPT, "{executor}: chunk 0 was decoded before the switch");
            let first = prompts.iter().position(|p| p == OTHER).unwrap_or(prompts.len());
            assert!(prompts[first..].iter().all(|p| p == OTHER), "{executor}: {prompts:?}");
            assert!(report.segments.len() <= 2 && report.segments[0].prompt == PROMPT, "{executor}: {:?}", report.segments);
        }
        assert_eq!(pipe.check_prompt("A red ball bounces.").unwrap(), PROMPT);
        let err = pipe.check_prompt("a purple dragon").unwrap_err().to_string();
        assert!(err.contains("'dragon'"), "{err}");
        let live = LiveSwitch::new();
        live.switch_to("a purple dragon");
        let err = pipe.generate(&request(3).live_switch(live)).unwrap_err();
        let err = format!("{err}: {:?}", std::error::Error::source(&err));
        assert!(err.contains("live prompt switch") && err.contains("'dragon'"), "{err}");
    }

    #[test]
    fn generate_switch_reads_each_prompt_like_the_main_one() {
        let scratch = Scratch::new("switch-cli");
        let world = world_dir(&scratch.0);
        let [plain, switched, bad] = ["plain.mp4", "switched.mp4", "bad.mp4"].map(|f| scratch.0.join(f));
        assert!(generate(&world, PROMPT, &plain, &[]).status.success());
        let output = generate(&world, PROMPT, &switched, &["--switch", &format!("1={OTHER}")]);
        let log = stderr(&output);
        assert!(output.status.success(), "{log}");
        assert!(log.contains(&format!("switch at 1 s: latent 4 (0.81 s) to \"{OTHER}\"")), "{log}");
        assert_ne!(fs::read(&plain).unwrap(), fs::read(&switched).unwrap());
        let output = generate(&world, PROMPT, &bad, &["--switch", "1=a purple dragon flies"]);
        let err = stderr(&output);
        assert!(!output.status.success() && !bad.exists(), "{err}");
        assert!(err.contains("the prompt switch at 1 s") && err.contains("unknown words 'dragon', 'flies'"), "{err}");
        for (flag, why) in [("3=a red square", "outside the video"), ("1", "SECONDS=PROMPT")] {
            let output = generate(&world, PROMPT, &bad, &["--switch", flag]);
            assert!(!output.status.success() && stderr(&output).contains(why), "{flag}: {}", stderr(&output));
        }
        let output = generate(&world, PROMPT, &bad, &["--switch", &format!("1={OTHER}"), "--schedule", "bidirectional"]);
        assert!(stderr(&output).contains("whole clip in one forward"), "{}", stderr(&output));
    }
}
