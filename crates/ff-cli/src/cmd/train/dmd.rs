//! `flashforward train dmd --model-dir DIR --dit PHASE1_RUN_OR_WEIGHTS --teacher
//! TEACHER_DIR_OR_FILE --data DATA --out RUN --steps N --seed S [--planner PLANNER] [--config
//! FILE] [--resume]`:
//! Phase 2, self-rollout DMD (`ff_train::dmd`). Same conventions as `train sft`: flags override
//! the config file (top-level paths, `[train]` for the generator's engine, `[dmd]`), `--resume`
//! continues from the newest checkpoint with `RUN/config.toml`, the same progress bar, metrics
//! log (`generator_loss`, `critic_loss` per generator step) and checkpoints, which
//! `generate --dit RUN` loads (the student's EMA with its planner and renderer roles). A run that
//! reaches its last step exports the student to `RUN/transformer/` (merged roles and manifest,
//! see `export`), the DiT folder of the default model.
//!
//! Models: the student from `--dit` (a Phase 1 run, whose LoRA rank the run keeps; an exported
//! student folder such as `models/world/transformer/`, whose merged roles are split back into a
//! backbone and per-role adapters of the config's `lora_rank`, `ff_train::checkpoint::unmerge_roles`,
//! so that Phase 2 continues from it, best with `[dmd] critic_warmup` (beside a frozen planner only
//! its renderer, with fresh roles); or any Wan DiT weights,
//! which get fresh roles); the frozen teacher from `--teacher` (a model directory,
//! or weights in the model directory's DiT config), never written; the critic's base from
//! `[dmd] critic` (default: the model directory's DiT, the raw backbone as in Self-Forcing), with
//! a fresh LoRA; with `[dmd] planner_steps > 0`, the frozen planner from `--planner` (a Phase 1
//! run's planner role, an exported student's planner, or plain DiT weights; on the teacher's
//! device), whose guided Euler anchors the renderer trains on and which the export takes as its
//! planner; the VAE (image heads) and the text encoder (the empty prompt, encoded once on
//! the CPU) from the model directory. The teacher and VAE live on `devices[teacher_device]`, the
//! critic on `devices[critic_device]`.

use super::flags::{RunFlags, apply};
use super::run::{finish, observed, prepare};
use crate::backend::{BackendTask, CpuBackend, Precision, cpu_device, dispatch};
use anyhow::{Context, Result, bail};
use burn::backend::Autodiff;
use burn::tensor::backend::Backend;
use ff_model::text::PromptEncoderFiles;
use ff_model::vae::WanVae;
use ff_model::{AttentionBackend, DitConfig, LoraConfig, WanDit};
use ff_sched::student::StudentManifest;
use ff_sched::student::exported_roles;
use ff_train::checkpoint::{latest, load_dit, load_planner, read_state, unmerge_roles};
use ff_train::data::ClipSource;
use ff_train::dmd::{DmdConfig, DmdShared, DmdTrainer};
use ff_train::runner::export::export_student;
use ff_train::runner::{DmdSteps, Outcome, RunConfig, Session, drive};
use flashforward::model::files::dit_files;
use flashforward::model::{Configs, Fallback, FileOverrides};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

const SECTION: &str = "dmd";

/// The `[dmd]` section: the objective's keys and the models' paths and devices.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Section {
    /// The student: a Phase 1 run or checkpoint folder, an exported student, or Wan DiT weights (`--dit`).
    pub dit: Option<PathBuf>,
    /// The real score: a model directory or DiT weights (`--teacher`).
    pub teacher: Option<PathBuf>,
    /// The critic's base DiT weights (default: the model directory's DiT).
    pub critic: Option<PathBuf>,
    /// The frozen planner when `planner_steps > 0` (`--planner`): a run, checkpoint, exported
    /// student or DiT weights.
    pub planner: Option<PathBuf>,
    /// Index in `devices` of the teacher's and the VAE's device.
    pub teacher_device: usize,
    /// Index in `devices` of the critic's device (its data-parallel workers start there).
    pub critic_device: usize,
    #[serde(flatten)]
    pub objective: DmdConfig,
}

impl Default for Section {
    fn default() -> Self {
        Self { dit: None, teacher: None, critic: None, planner: None, teacher_device: 0, critic_device: 0, objective: DmdConfig::new() }
    }
}

#[derive(clap::Args)]
pub struct Args {
    /// Model directory in a layout `generate` reads: DiT config (and default critic), VAE, text encoder.
    #[arg(long)]
    model_dir: Option<PathBuf>,
    /// The student: a Phase 1 run (`train sft --out`), a checkpoint folder, an exported student
    /// (merged planner/ and renderer/), or Wan DiT weights.
    #[arg(long)]
    dit: Option<PathBuf>,
    /// The frozen real score: a model directory or DiT weights (read only).
    #[arg(long)]
    teacher: Option<PathBuf>,
    /// The frozen planner whose anchors the renderer trains on (`[dmd] planner_steps > 0`): a
    /// Phase 1 run (its planner role), an exported student (its planner) or DiT weights.
    #[arg(long)]
    planner: Option<PathBuf>,
    /// Latent-clip dataset written by `encode-videos` (prompts and latent shape).
    #[arg(long)]
    data: Option<PathBuf>,
    #[command(flatten)]
    run: RunFlags,
}

pub fn run(args: Args) -> Result<ExitCode> {
    let mut config = RunConfig::defaults(SECTION, Section::default());
    config.train = DmdConfig::generator_defaults();
    let mut config = apply(config, &args.run, &args.model_dir, &args.data)?;
    let section = &mut config.objective;
    for (key, value) in [(&mut section.dit, &args.dit), (&mut section.teacher, &args.teacher), (&mut section.planner, &args.planner)] {
        if value.is_some() {
            key.clone_from(value);
        }
    }
    config.objective.objective.validate().context("[dmd]")?;
    match (&config.objective.planner, config.objective.objective.planner_steps) {
        (None, n @ 1..) => bail!("[dmd] planner_steps = {n} samples a frozen planner: pass --planner PLANNER or set `dmd.planner`"),
        (Some(path), 0) => bail!("--planner {} needs [dmd] planner_steps > 0 (the Euler steps it is sampled by)", path.display()),
        _ => {}
    }
    let Some(dit) = config.objective.dit.clone() else { bail!("no student: pass --dit PHASE1_RUN_OR_WEIGHTS or set `dmd.dit`") };
    if config.objective.teacher.is_none() {
        bail!("no teacher: pass --teacher TEACHER_DIR_OR_FILE or set `dmd.teacher`");
    }
    // A Phase 1 run keeps its adapters (the export reads the roles at this rank and sharing).
    if let Some(state) = phase1_state(&dit)? {
        let t = &mut config.train;
        (t.lora_rank, t.lora_alpha, t.lora_shared) = (state.train.lora_rank, state.train.lora_alpha, state.train.lora_shared);
    }
    let (session, devices) = prepare(config, &args.run, None)?;
    let manifest = student_manifest(&session)?;
    let outcome = dispatch(&devices, Precision::F32, Dmd { session: &session })?;
    let code = finish(&outcome);
    // Node 0 exports; the other nodes of a multi-node run only trained beside it.
    if let Outcome::Finished { .. } = outcome
        && session.nodes.writes()
    {
        let planner = session.config.objective.planner.as_deref();
        let dir = export_student::<CpuBackend>(session.start.config(), &session.run, &manifest, planner, &cpu_device())?;
        println!("{}", dir.display());
    }
    Ok(code)
}

/// What the run's student is trained for: its rollouts' contract, the frame size of its clips,
/// and their captions' vocabulary.
fn student_manifest(session: &Session<Section>) -> Result<StudentManifest> {
    let clips = &session.data.manifest().clips;
    let Some(first) = clips.first() else { bail!("{}: the dataset has no clips", session.data.dir().display()) };
    if let Some(other) = clips.iter().find(|c| c.frame_size != first.frame_size) {
        bail!(
            "{}: clips of {:?} and {:?} px: a student is trained at one frame size",
            session.data.dir().display(),
            first.frame_size,
            other.frame_size
        );
    }
    Ok(StudentManifest {
        contract: session.config.objective.objective.contract_config(session.config.objective.objective.latents),
        frame_size: first.frame_size,
        vocabulary: flashforward::prompt::vocabulary_of(clips.iter().map(|c| c.caption.as_str())),
    })
}

/// The `state.json` of the Phase 1 checkpoint `path` names, if it names one.
fn phase1_state(path: &Path) -> Result<Option<ff_train::checkpoint::CheckpointState>> {
    if !path.is_dir() {
        return Ok(None);
    }
    let dir = if path.join(ff_train::checkpoint::STATE_FILE).is_file() { Some(path.to_path_buf()) } else { latest(path)? };
    Ok(dir.map(|d| read_state(&d)).transpose()?)
}

/// The student at `path` with its roles: an exported student's two merged models split back into
/// a backbone and adapters of `lora` (beside a frozen planner, `renderer_only`: its renderer with
/// fresh roles, the student's own planner being unused), a checkpoint's roles, or a plain DiT
/// with fresh roles.
fn load_student<B: AttentionBackend>(
    config: &DitConfig,
    path: &Path,
    lora: &LoraConfig,
    renderer_only: bool,
    device: &B::Device,
) -> Result<WanDit<B>> {
    if let Some([planner, renderer]) = exported_roles(path)? {
        let load = |file: &Path| WanDit::<B>::load(config, file, device).with_context(|| format!("cannot load {}", file.display()));
        return Ok(match renderer_only {
            true => load(&renderer)?.with_roles(lora),
            false => unmerge_roles(&load(&planner)?, load(&renderer)?, lora, path)?,
        });
    }
    let student = load_dit::<B>(config, path, device)?;
    Ok(match student.role_embedding {
        Some(_) => student,
        None => student.with_roles(lora),
    })
}

struct Dmd<'a> {
    session: &'a Session<Section>,
}

impl BackendTask for Dmd<'_> {
    type Output = Outcome;

    fn run<B: AttentionBackend>(self, devices: Vec<B::Device>) -> Result<Outcome> {
        let s = self.session;
        let dit_config = s.start.config();
        let (c, section) = (&s.config.train, &s.config.objective);
        let pick =
            |i: usize, what: &str| devices.get(i).cloned().with_context(|| format!("[dmd] {what} = {i}: only {} devices", devices.len()));
        let teacher_device = pick(section.teacher_device, "teacher_device")?;
        let mut critic_devices = devices.clone();
        critic_devices.rotate_left(section.critic_device);
        pick(section.critic_device, "critic_device")?;
        Autodiff::<B>::seed(&devices[0], c.seed);

        let dit_path = section.dit.as_ref().expect("checked before");
        let student = load_student::<Autodiff<B>>(dit_config, dit_path, &c.lora(), section.planner.is_some(), &devices[0])
            .with_context(|| format!("cannot load the student from {}", dit_path.display()))?;
        let teacher_path = section.teacher.as_ref().expect("checked before");
        let (teacher_weights, teacher_config) = match teacher_path.is_dir() {
            true => {
                let (w, config) = dit_files(teacher_path)?;
                (w, ff_model::DitConfig::from_json(&config)?)
            }
            false => (teacher_path.clone(), dit_config.clone()),
        };
        let teacher = WanDit::<B>::load(&teacher_config, &teacher_weights, &teacher_device)
            .with_context(|| format!("cannot load the teacher from {}", teacher_weights.display()))?;
        let critic_base =
            section.critic.clone().or_else(|| s.start.base().map(Path::to_path_buf)).context("no critic base: set `dmd.critic`")?;
        let critic = WanDit::<Autodiff<B>>::load(dit_config, &critic_base, &critic_devices[0])
            .with_context(|| format!("cannot load the critic's base from {}", critic_base.display()))?;

        let model_dir = s.config.paths.model_dir.clone();
        let files = FileOverrides { model_dir, ..Default::default() }.resolve(Fallback::Hub(None))?;
        let configs = Configs::read(&files)?;
        let vae = WanVae::<B>::load(&files.vae, &configs.vae, &teacher_device)
            .with_context(|| format!("cannot load the VAE from {}", files.vae.display()))?;
        let text = PromptEncoderFiles {
            tokenizer: files.tokenizer,
            weights: files.text_encoder,
            config: configs.text,
            max_len: dit_config.text_len,
        };
        let empty = text.embed::<CpuBackend>(&[""], None, &cpu_device()).context("cannot encode the empty prompt")?;
        let empty = empty.into_iter().next().context("the text encoder returned no embedding")?.data;

        let planner = section.planner.as_ref().map(|path| {
            load_planner::<B>(dit_config, path, &teacher_device)
                .with_context(|| format!("cannot load the frozen planner from {}", path.display()))
        });
        let planner = planner.transpose()?;
        let shared = DmdShared::new(section.objective.clone(), teacher, vae, empty, planner)?;
        let trainer = DmdTrainer::new(c.clone(), student, devices.clone(), critic, critic_devices, shared, s.data.len())?
            .with_nodes(s.nodes.clone())?;
        let mut steps = DmdSteps { trainer, critic_base };
        observed(|stop, progress| drive(&s.plan(), &s.data, &mut steps, stop, progress))
    }
}
