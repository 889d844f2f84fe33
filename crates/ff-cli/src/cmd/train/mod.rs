//! `flashforward train`: the training commands. Each phase is a subcommand over the same runner
//! (`ff_train::runner`: config file, loop, checkpoints, resume, metrics, export); this module
//! adds the flags over the config ([`flags`]), the backend, Ctrl-C and the progress bar ([`mod@run`],
//! [`progress`]).

mod combine;
mod dmd;
mod flags;
mod progress;
mod run;
mod sft;
mod teacher;
mod vae;

command_group! {
    /// Phase 1: packed time-rebased supervised fine-tuning of the planner and renderer roles.
    Sft => sft,
    /// The small world's codec: a tiny Wan VAE trained on procedural clips (reconstruction + β·KL).
    Vae => vae,
    /// Phase 2: self-rollout DMD distillation of the student against a frozen teacher and a LoRA critic.
    Dmd => dmd,
    /// The small world's teacher: a bidirectional DiT from scratch, flow matching with text dropout.
    Teacher => teacher,
    /// A student with another run's planner (a Phase 1 run's), sampled by guided Euler steps.
    Combine => combine,
}
