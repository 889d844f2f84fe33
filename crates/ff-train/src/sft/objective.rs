//! [`SftObjective`]: Phase 1 as an [`Objective`]: draw (start, crop offsets, σ, ε), pack the
//! clip, run one differentiable [`WanDit::forward_packed`] under the layout's rules, and return
//! the grouped velocity loss with its groups as [`Loss::parts`].

use super::config::SftConfig;
use super::layout::PackedLayout;
use super::loss::grouped_loss;
use super::pack::{Draw, Packed, clip_shape, crops_cover, pack};
use crate::data::LatentClip;
use crate::flow::padded_prompt;
use crate::objective::{Loss, Objective};
use crate::{Result, TrainError, TrainRng};
use burn::tensor::{Tensor, backend::AutodiffBackend};
use ff_model::{AttentionBackend, WanDit};
use ff_sched::Contract;

/// Phase 1 packed time-rebased SFT over a validated [`SftConfig`].
#[derive(Clone, Debug)]
pub struct SftObjective {
    config: SftConfig,
    clip: Contract,
    crop: Option<Contract>,
}

impl SftObjective {
    /// Validates `config` and builds the clip's contract (and the crops' when it has crops);
    /// an invalid config is a [`TrainError::Config`](crate::TrainError::Config).
    pub fn new(config: SftConfig) -> Result<Self> {
        config.validate()?;
        let clip = config.contract(config.latents)?;
        let crop = if config.rebased_crops > 0 { Some(config.contract(config.crop_latents())?) } else { None };
        Ok(Self { config, clip, crop })
    }

    /// The SFT config.
    pub fn config(&self) -> &SftConfig {
        &self.config
    }

    /// The packed layout of a step whose crops sit at `offsets`.
    pub fn layout(&self, offsets: &[usize]) -> PackedLayout {
        PackedLayout::new(&self.clip, self.crop.as_ref(), offsets)
    }

    /// Draws one step's randomness for `clip` (errors name a clip too short or malformed).
    pub fn draw(&self, clip: &LatentClip, rng: &mut TrainRng) -> Result<Draw> {
        let c = &self.config;
        let shape = clip_shape(&clip.latents, c.latents).map_err(|e| TrainError::Shape(format!("clip '{}': {e}", clip.caption)))?;
        Ok(Draw::sample(c, &shape, rng))
    }

    /// The text context `[1, text_len, text_dim]` the model reads for `clip`: its prompt
    /// embedding zero-padded to the DiT's `text_len`, the context `generate`, the teacher and
    /// Phase 2 build (`padded_prompt`, `PromptEmbedding::to_context`).
    pub fn context<B: AttentionBackend>(&self, model: &WanDit<B>, clip: &LatentClip) -> Result<Tensor<B, 3>> {
        Ok(padded_prompt(model, &clip.prompt, &clip.caption)?.unsqueeze())
    }

    /// The loss of `clip` under `model` for a given draw.
    pub fn loss_of<B>(&self, model: &WanDit<B>, clip: &LatentClip, draw: &Draw) -> Result<Loss<B>>
    where
        B: AutodiffBackend + AttentionBackend,
        B::InnerBackend: AttentionBackend,
    {
        let device = model.device();
        let text = model.text_context(self.context(model, clip)?);
        let layout = self.layout(&draw.offsets);
        let crops = match &clip.crops {
            Some(crops) if self.crop.is_some() => {
                let shape = clip_shape(&clip.latents, self.config.latents)
                    .map_err(|e| TrainError::Shape(format!("clip '{}': {e}", clip.caption)))?;
                crops_cover(crops, &shape, self.config.crop_latents())
                    .map_err(|e| TrainError::Shape(format!("clip '{}': {e}", clip.caption)))?;
                Some(crops)
            }
            _ => None,
        };
        let Packed { inputs, targets, timesteps } = pack::<B>(&clip.latents, crops, draw, &layout, &device);
        let prediction = model.forward_packed(inputs, &[timesteps], &layout.frame_layout(), &text, &layout.mask)?;
        let (total, parts) = grouped_loss(prediction, targets, &layout);
        Ok(Loss { total, parts: parts.into_iter().map(|(g, l)| (g.name(), l.detach())).collect() })
    }
}

impl<B> Objective<B> for SftObjective
where
    B: AutodiffBackend + AttentionBackend,
    B::InnerBackend: AttentionBackend,
{
    fn loss(&self, model: &WanDit<B>, clip: &LatentClip, rng: &mut TrainRng) -> Result<Loss<B>> {
        let draw = self.draw(clip, rng)?;
        self.loss_of(model, clip, &draw)
    }
}
