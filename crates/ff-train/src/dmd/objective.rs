//! The generator's and the critic's [`Objective`]s. Both hold what stays fixed during their
//! update: [`DmdShared`] (config, contract, frozen teacher, VAE, empty prompt) plus the other
//! network's current weights without gradient (the critic for the generator, the student for
//! the critic) and the step's exit stage `k*`.
//!
//! With a frozen planner, both rollouts render around its anchors ([`FrozenPlanner`]).
//!
//! Per clip, randomness is drawn from the clip's stream in this order: the rollout's noise seed,
//! whether the scored sample is the splice (only when `anchor_score > 0`), the score timestep,
//! the tiles' ε.

use super::config::DmdConfig;
use super::loss::{dmd_loss, flow_loss};
use super::rollout::{AnchorRead, FrozenPlanner, Planned, Rollout, Student, rollout};
use super::scores::{Score, dmd_gradient, score_role, score_timestep, tiles, windows};
use crate::data::LatentClip;
use crate::flow::padded_prompt;
use crate::objective::{Loss, Objective};
use crate::{Result, TrainError, TrainRng};
use burn::module::Module;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{Tensor, TensorData};
use ff_model::vae::WanVae;
use ff_model::{AttentionBackend, FlowMatch, WanDit};
use ff_sched::Contract;
use ff_sched::exec::NoiseSpec;

/// What both objectives read and no update changes.
pub struct DmdShared<B: AttentionBackend> {
    /// Phase 2's numbers.
    pub config: DmdConfig,
    /// The inference contract the rollouts follow (stages, anchors, chunks, reads).
    pub contract: Contract,
    /// The frozen real score, on its own device.
    pub teacher: WanDit<B>,
    /// Decodes and re-encodes the image heads (on its own device).
    pub vae: WanVae<B>,
    /// The empty prompt's embedding `[tokens, text_dim]` (guidance's unconditional branch).
    pub empty_prompt: TensorData,
    /// The planner the rollouts take their anchors from when it is frozen (`planner_steps > 0`).
    pub planner: Option<FrozenPlanner<B>>,
    vae_device: B::Device,
}

impl<B: AttentionBackend> DmdShared<B> {
    /// `planner`: the frozen planner (a plain DiT), required exactly when `planner_steps > 0`.
    pub fn new(
        config: DmdConfig,
        teacher: WanDit<B>,
        vae: WanVae<B>,
        empty_prompt: TensorData,
        planner: Option<WanDit<B>>,
    ) -> Result<Self> {
        config.validate()?;
        match (config.planner_steps, &planner) {
            (0, Some(_)) => {
                return Err(TrainError::Config("dmd: a frozen planner is sampled by Euler steps: set planner_steps > 0".into()));
            }
            (n, None) if n > 0 => {
                return Err(TrainError::Config(format!(
                    "dmd: planner_steps = {n} samples a frozen planner, and none is given (`dmd.planner`: a Phase 1 run or an exported student)"
                )));
            }
            (_, Some(p)) if p.role_embedding.is_some() => {
                return Err(TrainError::Config("dmd: the frozen planner must be a plain DiT (merge its planner role)".into()));
            }
            _ => {}
        }
        let vae_device = vae.devices().into_iter().next().unwrap_or_default();
        let planner = planner.map(FrozenPlanner::new);
        Ok(Self { contract: config.contract()?, config, teacher, vae, empty_prompt, planner, vae_device })
    }

    /// The frozen planner's anchors for `clip` (rollout noise `noise` gives the latent shape),
    /// on `device`; `None` when the student plans.
    fn planned(&self, clip: &LatentClip, noise: &NoiseSpec, device: &B::Device) -> Result<Option<Planned<B>>> {
        let Some(planner) = &self.planner else { return Ok(None) };
        let prompt = padded_prompt(planner.model(), &clip.prompt, &clip.caption)?.unsqueeze::<3>();
        let empty = padded_prompt(planner.model(), &self.empty_prompt, "empty prompt")?.unsqueeze::<3>();
        let planned = planner.plan(&self.contract, &clip.caption, prompt, empty, [noise.channels, noise.height, noise.width])?;
        Ok(Some(planned.to_device(device)))
    }

    /// The rollout noise of `clip` (its latent shape; seed from `rng`).
    fn noise(&self, clip: &LatentClip, channels: usize, rng: &mut TrainRng) -> Result<NoiseSpec> {
        match clip.latents.shape[..] {
            [c, _, height, width] if c == channels => Ok(NoiseSpec { seed: rng.next_u64(), channels, height, width }),
            _ => Err(TrainError::Shape(format!(
                "clip '{}': latents {:?} must be [{channels}, frames, height, width]",
                clip.caption, clip.latents.shape
            ))),
        }
    }

    /// The sample the scores see: the rollout's x̂₀, or with probability `anchor_score` its
    /// splice with the anchors ([`Rollout::spliced`]).
    fn scored<A: AttentionBackend>(&self, out: Rollout<A>, rng: &mut TrainRng) -> Tensor<A, 5> {
        match self.config.anchor_score > 0.0 && rng.uniform() < self.config.anchor_score {
            true => out.spliced(&self.contract.anchors),
            false => out.x0,
        }
    }

    fn read(&self) -> AnchorRead {
        if self.config.connect_anchor_read { AnchorRead::Connected } else { AnchorRead::Detached }
    }
}

/// The generator update: the student's rollout at `exit`, scored by the teacher and `critic`.
pub struct GeneratorObjective<'a, B: AttentionBackend> {
    /// The frozen parts.
    pub shared: &'a DmdShared<B>,
    /// The critic (fake score), its LoRA as trained so far.
    pub critic: &'a WanDit<B>,
    /// The exit stage `k*` (`0..S`) of this step's rollout.
    pub exit: usize,
}

impl<B> Objective<B> for GeneratorObjective<'_, B::InnerBackend>
where
    B: AutodiffBackend + AttentionBackend,
    B::InnerBackend: AttentionBackend,
{
    fn loss(&self, model: &WanDit<B>, clip: &LatentClip, rng: &mut TrainRng) -> Result<Loss<B>> {
        let s = self.shared;
        let noise = s.noise(clip, model.config().in_channels, rng)?;
        let prompt = padded_prompt(model, &clip.prompt, &clip.caption)?.unsqueeze::<3>();
        let frozen = model.clone().no_grad();
        let planned = s.planned(clip, &noise, &model.device())?.map(Planned::lift);
        let student = Student { live: model, frozen: &frozen };
        let out = rollout(&student, prompt.clone(), &s.contract, &noise, self.exit, s.read(), planned)?;
        let sample = s.scored(out, rng);
        let t = score_timestep(&s.config, rng);
        let empty = padded_prompt(&s.teacher, &s.empty_prompt, "empty prompt")?.unsqueeze::<3>();
        let real = Score::new(&s.teacher, prompt.clone().inner(), empty.clone(), s.config.real_guidance);
        let fake = Score::new(self.critic, prompt.inner(), empty, s.config.fake_guidance);
        let x0 = sample.clone().inner().to_device(&s.vae_device.clone());
        let grad = dmd_gradient(&real, &fake, &s.vae, x0, s.config.score_window, t, rng)?;
        let grad = Tensor::from_inner(grad.to_device(&model.device()));
        Ok(Loss { total: dmd_loss(sample, grad), parts: Vec::new() })
    }
}

/// The critic update: flow matching on a fresh no-grad rollout of `student` at `exit`.
pub struct CriticObjective<'a, B: AttentionBackend> {
    /// The frozen parts.
    pub shared: &'a DmdShared<B>,
    /// The student (generator) whose rollout gives the critic's samples, run without gradients.
    pub student: &'a WanDit<B>,
    /// The exit stage `k*` (`0..S`) of the rollout.
    pub exit: usize,
}

impl<B> Objective<B> for CriticObjective<'_, B::InnerBackend>
where
    B: AutodiffBackend + AttentionBackend,
    B::InnerBackend: AttentionBackend,
{
    fn loss(&self, model: &WanDit<B>, clip: &LatentClip, rng: &mut TrainRng) -> Result<Loss<B>> {
        let s = self.shared;
        let student = Student { live: self.student, frozen: self.student };
        let noise = s.noise(clip, self.student.config().in_channels, rng)?;
        let prompt = padded_prompt(self.student, &clip.prompt, &clip.caption)?.unsqueeze::<3>();
        let planned = s.planned(clip, &noise, &self.student.device())?;
        let out = rollout(&student, prompt, &s.contract, &noise, self.exit, AnchorRead::Connected, planned)?;
        let sample = s.scored(out, rng);
        let t = score_timestep(&s.config, rng);
        let sigma = t / 1000.0;
        let text = model.text_context(padded_prompt(model, &clip.prompt, &clip.caption)?.unsqueeze());
        let role = score_role(model);
        let device = model.device();
        let tiles = tiles(s.contract.config.latents, s.config.score_window);
        let (mut total, mut count) = (Tensor::<B, 1>::zeros([1], &device), 0);
        for (x, head) in windows(&s.vae, sample.to_device(&s.vae_device.clone()), &tiles)? {
            let dims = x.dims();
            let x = Tensor::<B, 5>::from_inner(x.to_device(&device));
            let eps = Tensor::<B, 5>::from_data(rng.normal_data(dims.to_vec()), &device);
            let v = model.forward(FlowMatch::noise(x.clone(), eps.clone(), sigma), &[vec![t; dims[2]]], &text, role)?;
            let (sum, n) = flow_loss(v, eps, x, head);
            (total, count) = (total + sum, count + n);
        }
        Ok(Loss { total: total / count as f64, parts: Vec::new() })
    }
}
