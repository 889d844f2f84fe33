//! [`WanDit`]: the Wan2.1 T2V DiT with its forwards.
//!
//! Shapes: latents `[batch, C_in, frames, height, width]`; tokens `[batch, frames·t, dim]` with
//! `t = (height/ph)·(width/pw)` per latent frame (`pt = 1`); timesteps one per batch element and
//! latent frame on the 1000 scale; prediction `[batch, C_out, frames, height, width]`.
//!
//! * [`WanDit::forward_chunk`]: one chunk over a [`KvContext`] (published K/V segments), returning
//!   the prediction and the chunk's own per-layer K/V, ready to publish.
//! * [`WanDit::forward_packed`]: frames of several roles/positions/timesteps in one sequence under
//!   a frame-level [`SegmentMask`], attended as a block table (differentiable; the packed SFT
//!   layout).
//! * [`WanDit::forward`]: a whole clip at positions `0..frames` (the reference model's forward).
//! * [`WanDit::forward_shard`]: one device's shard of a context-parallel chunk or packed forward
//!   (whole frames per shard, K/V all-gathered per layer; `dit::parallel`).
//!
//! Precision: the token path runs in the parameters' dtype (e.g. bf16); the time embedding, its
//! projection, the modulation, the norms, RoPE and the residual stream run in f32, and the
//! prediction is returned in f32 (inputs of any float dtype are cast).

use super::attention::Attend;
use super::block::{DitBlock, Head};
use super::config::DitConfig;
use super::embed::{Mlp, PatchEmbed, linear_f32, timestep_features};
use super::kv::{ChunkKv, KvContext, SegmentContext, TextContext};
use super::layout::{FrameLayout, SegmentMask};
use super::parallel::{Shard, ShardReads};
use super::rope::Rope;
use super::training::{checkpointed_block, sharded_packed};
use crate::error::{ModelError, Result};
use crate::lora::{LoraConfig, Role, RoleSelect};
use burn::module::{Module, Param};
use burn::nn::Linear;
use burn::nn::LinearConfig;
use burn::tensor::activation::silu;
use burn::tensor::{DType, Int, Tensor};
use kernels_cubecl::AttentionBackend;
use kernels_cubecl::BlockTable;
use kernels_cubecl::gelu_tanh;

/// The Wan2.1 text-to-video diffusion transformer, with optional planner/renderer roles.
///
/// The tiny model of the reference fixtures, a whole-clip forward and a chunk forward that
/// publishes its K/V:
///
/// ```
/// use burn::backend::NdArray;
/// use burn::tensor::{Distribution, Tensor};
/// use ff_model::DitConfig;
/// use ff_model::dit::{FrameLayout, Role, SegmentContext};
///
/// let device = Default::default();
/// let model = DitConfig::tiny().init::<NdArray>(&device); // 2 layers, 2 heads × 16, text_dim 24
/// // A prompt's encoder output `[batch, text_tokens, text_dim]`, embedded once.
/// let text = model.text_context(Tensor::random([1, 6, 24], Distribution::Normal(0.0, 1.0), &device));
/// // Latents `[batch, 16, frames, height, width]`, one timestep per frame on the 1000 scale.
/// let latents = Tensor::<NdArray, 5>::random([1, 16, 2, 4, 4], Distribution::Normal(0.0, 1.0), &device);
/// let v = model.forward(latents.clone(), &[vec![500.0, 500.0]], &text, Role::Base).unwrap();
/// assert_eq!(v.dims(), [1, 16, 2, 4, 4]);
///
/// // The same frames as a chunk at latent positions 6, 7 over no published context.
/// let layout = FrameLayout::chunk(6, 2, Role::Base);
/// let out = model.forward_chunk(latents, &[vec![500.0, 500.0]], &layout, &text, &SegmentContext::empty()).unwrap();
/// assert_eq!(out.prediction.dims(), [1, 16, 2, 4, 4]);
/// assert_eq!(out.kv.layers.len(), 2); // one K/V entry per layer
/// assert_eq!(out.kv.tokens(), 2 * (4 / 2) * (4 / 2)); // frames × tokens per frame (patch 1×2×2)
/// ```
#[derive(Module, Debug)]
pub struct WanDit<B: AttentionBackend> {
    /// Latents to tokens ([`PatchEmbed`]).
    pub patch_embedding: PatchEmbed<B>,
    /// Prompt embedding `text_dim → dim → dim` (GELU tanh).
    pub text_embedding: Mlp<B>,
    /// Time embedding `freq_dim → dim → dim` (SiLU) of the sinusoidal timestep features.
    pub time_embedding: Mlp<B>,
    /// `dim → 6·dim`: the blocks' modulation input from the time embedding.
    pub time_projection: Linear<B>,
    /// The transformer blocks.
    pub blocks: Vec<DitBlock<B>>,
    /// The output head.
    pub head: Head<B>,
    /// `[2, dim]` role vectors (planner, renderer) added to the time embedding; absent on a plain model.
    pub role_embedding: Option<Param<Tensor<B, 2>>>,
    /// The hyper-parameters it was built from.
    #[module(skip)]
    pub config: DitConfig,
    /// Whether each block of a packed forward is a checkpointed region
    /// ([`WanDit::with_block_checkpointing`]).
    #[module(skip)]
    pub checkpoint_blocks: bool,
    /// The devices each packed forward is sharded across (context parallelism; none or one: not
    /// sharded; [`WanDit::with_context_parallel`]).
    #[module(skip)]
    pub context_parallel: Vec<B::Device>,
}

/// Prediction and published K/V of a chunk forward.
pub struct ChunkOutput<B: AttentionBackend> {
    /// The flow prediction `[batch, C_out, frames, height, width]` (f32).
    pub prediction: Tensor<B, 5>,
    /// The chunk's own post-RoPE self-attention K/V, one entry per layer.
    pub kv: ChunkKv<B>,
}

impl DitConfig {
    /// A model with random weights (Burn's default initialisers; modulation tables `N(0, 1/dim)` as Wan).
    pub fn init<B: AttentionBackend>(&self, device: &B::Device) -> WanDit<B> {
        let d = self.dim;
        WanDit {
            patch_embedding: PatchEmbed::new(self.in_channels, d, self.patch_size, device),
            text_embedding: Mlp::new(self.text_dim, d, d, device),
            time_embedding: Mlp::new(self.freq_dim, d, d, device),
            time_projection: LinearConfig::new(d, 6 * d).init(device),
            blocks: (0..self.num_layers).map(|_| DitBlock::new(d, self.ffn_dim, self.num_heads, self.eps, device)).collect(),
            head: Head::new(d, self.patch_out(), self.eps, device),
            role_embedding: None,
            config: self.clone(),
            checkpoint_blocks: false,
            context_parallel: Vec::new(),
        }
        .materialized()
    }
}

/// Forces Burn's lazily initialised parameters, so that clones of a fresh model (one per
/// worker, a merged copy) share its weights instead of drawing their own.
struct Materialize;

impl<B: AttentionBackend> burn::module::ModuleVisitor<B> for Materialize {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        let _ = param.val();
    }
}

impl<B: AttentionBackend> WanDit<B> {
    /// The hyper-parameters.
    pub fn config(&self) -> &DitConfig {
        &self.config
    }

    /// The device the parameters live on.
    pub fn device(&self) -> B::Device {
        self.time_projection.weight.device()
    }

    /// Adds the planner/renderer roles: zero role vectors and fresh adapters (`B = 0`), so the
    /// roles start as the plain backbone.
    pub fn with_roles(self, lora: &LoraConfig) -> Self {
        let device = self.device();
        Self {
            blocks: self.blocks.into_iter().map(|b| b.with_adapters(lora)).collect(),
            role_embedding: Some(Param::from_tensor(Tensor::zeros([Role::ADAPTED.len(), self.config.dim], &device))),
            ..self
        }
        .materialized()
    }

    fn materialized(self) -> Self {
        self.visit(&mut Materialize);
        self
    }

    /// A plain model (no roles) whose `Role::Base` forward equals this model's forward as `role`:
    /// adapters folded into the projections, the role vector into the time-embedding bias.
    pub fn merge(&self, role: Role) -> Self {
        let mut time_embedding = self.time_embedding.clone();
        if let (Some(table), Some(i)) = (&self.role_embedding, role.index()) {
            let r = table.val().narrow(0, i, 1).squeeze_dim::<1>(0);
            let bias = match &time_embedding.fc2.bias {
                Some(b) => b.val() + r,
                None => r,
            };
            time_embedding.fc2.bias = Some(Param::from_tensor(bias));
        }
        Self { time_embedding, blocks: self.blocks.iter().map(|b| b.merge(role)).collect(), role_embedding: None, ..self.clone() }
    }

    /// Float dtype of the token path's parameters (the f32 islands' may differ:
    /// [`WanDit::with_precision`]).
    pub fn dtype(&self) -> DType {
        self.patch_embedding.conv.weight.val().dtype()
    }

    /// Embeds a prompt once: `context [batch, text_tokens, text_dim]` → per-layer cross K/V.
    pub fn text_context(&self, context: Tensor<B, 3>) -> TextContext<B> {
        let text = self.text_embedding.forward(context.cast(self.dtype()), gelu_tanh);
        TextContext { layers: self.blocks.iter().map(|b| b.cross_attn.text_kv(text.clone())).collect() }
    }

    /// One chunk over published K/V; see the module docs for shapes.
    pub fn forward_chunk(
        &self,
        latents: Tensor<B, 5>,
        timesteps: &[Vec<f64>],
        layout: &FrameLayout,
        text: &TextContext<B>,
        ctx: &dyn KvContext<B>,
    ) -> Result<ChunkOutput<B>> {
        self.forward_chunks(latents, timesteps, std::slice::from_ref(layout), text, ctx)
    }

    /// Several chunks as one batch (e.g. the nodes of one wavefront anti-diagonal): batch element
    /// `b` has its own timesteps and its own layout `layouts[b]` (positions may differ; roles may
    /// not), and reads the keys the context supplies for batch element `b`.
    pub fn forward_chunks(
        &self,
        latents: Tensor<B, 5>,
        timesteps: &[Vec<f64>],
        layouts: &[FrameLayout],
        text: &TextContext<B>,
        ctx: &dyn KvContext<B>,
    ) -> Result<ChunkOutput<B>> {
        let (prediction, kv) = self.run(latents, timesteps, layouts, text, Attend::Context(ctx), true, None)?;
        Ok(ChunkOutput { prediction, kv: ChunkKv { layers: kv } })
    }

    /// Several frames in one sequence under frame-level attention rules (differentiable); sharded
    /// by frames across [`WanDit::with_context_parallel`]'s devices when it has several.
    pub fn forward_packed(
        &self,
        latents: Tensor<B, 5>,
        timesteps: &[Vec<f64>],
        layout: &FrameLayout,
        text: &TextContext<B>,
        mask: &SegmentMask,
    ) -> Result<Tensor<B, 5>> {
        if self.context_parallel.len() > 1 {
            return sharded_packed(self, latents, timesteps, layout, text, mask);
        }
        let table = self.packed_table(&latents, layout, mask)?;
        Ok(self.run(latents, timesteps, std::slice::from_ref(layout), text, Attend::Packed(table), false, None)?.0)
    }

    /// The block table of a packed forward's frame rules (checked against its layout).
    fn packed_table(&self, latents: &Tensor<B, 5>, layout: &FrameLayout, mask: &SegmentMask) -> Result<BlockTable> {
        if mask.frames() != layout.len() {
            return Err(ModelError::Input(format!("mask covers {} frames, layout {}", mask.frames(), layout.len())));
        }
        let [_, _, _, h, w] = latents.dims();
        let [_, ph, pw] = self.config.patch_size;
        Ok(mask.block_table(h / ph * (w / pw)))
    }

    /// A whole clip at positions `0..frames` with full attention (the reference forward).
    pub fn forward(&self, latents: Tensor<B, 5>, timesteps: &[Vec<f64>], text: &TextContext<B>, role: Role) -> Result<Tensor<B, 5>> {
        let frames = latents.dims()[2] / self.config.patch_size[0];
        let layout = FrameLayout::chunk(0, frames, role);
        Ok(self.run(latents, timesteps, &[layout], text, Attend::Context(&SegmentContext::empty()), false, None)?.0)
    }

    /// This device's shard of a context-parallel forward (`dit::parallel`, re-exported in `dit`): `latents`
    /// `[batch, C_in, shard.frames.len(), height, width]` and `timesteps` hold frames
    /// `shard.frames` of the whole forward, whose layout is `layout`; `reads` is the whole
    /// forward's ([`ShardReads`]). Returns the shard's prediction and, for a chunk forward, the
    /// whole forward's K/V (gathered, on this device, ready to publish; none for a packed one).
    pub fn forward_shard(
        &self,
        shard: &Shard<'_, B>,
        latents: Tensor<B, 5>,
        timesteps: &[Vec<f64>],
        layout: &FrameLayout,
        text: &TextContext<B>,
        reads: ShardReads<'_, B>,
    ) -> Result<ChunkOutput<B>> {
        let (attend, publish) = match reads {
            ShardReads::Context(ctx) => (Attend::Context(ctx), true),
            ShardReads::Packed(mask) => (Attend::Packed(self.packed_table(&latents, layout, mask)?), false),
        };
        let (prediction, kv) = self.run(latents, timesteps, &[shard.layout(layout)?], text, attend, publish, Some(shard))?;
        Ok(ChunkOutput { prediction, kv: ChunkKv { layers: kv } })
    }

    fn check_inputs(&self, dims: [usize; 5], timesteps: &[Vec<f64>], layouts: &[FrameLayout]) -> Result<()> {
        let [b, c, f, h, w] = dims;
        let [pt, ph, pw] = self.config.patch_size;
        if c != self.config.in_channels {
            return Err(ModelError::Input(format!("latents have {c} channels, the model takes {}", self.config.in_channels)));
        }
        if f % pt != 0 || h % ph != 0 || w % pw != 0 {
            return Err(ModelError::Input(format!("latent shape {f}×{h}×{w} is not divisible by the patch {:?}", self.config.patch_size)));
        }
        if layouts.len() != 1 && layouts.len() != b {
            return Err(ModelError::Input(format!("{} layouts for a batch of {b} (give 1 or {b})", layouts.len())));
        }
        let layout = &layouts[0];
        if let Some(l) = layouts.iter().find(|l| l.len() != f / pt || l.roles != layout.roles) {
            return Err(ModelError::Input(format!("layout {l:?} does not cover the {} latent frames with the batch's roles", f / pt)));
        }
        if timesteps.len() != b || timesteps.iter().any(|t| t.len() != f / pt) {
            return Err(ModelError::Input(format!("timesteps must be [{b}][{}] (batch × latent frames)", f / pt)));
        }
        if self.role_embedding.is_none() && layout.roles.iter().any(|r| *r != Role::Base) {
            return Err(ModelError::Input("a plain model runs Role::Base only: add roles with `with_roles` or `merge`".into()));
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn run(
        &self,
        latents: Tensor<B, 5>,
        timesteps: &[Vec<f64>],
        layouts: &[FrameLayout],
        text: &TextContext<B>,
        attend: Attend<B>,
        publish: bool,
        shard: Option<&Shard<'_, B>>,
    ) -> Result<(Tensor<B, 5>, Vec<super::kv::LayerKv<B>>)> {
        let dims = latents.dims();
        self.check_inputs(dims, timesteps, layouts)?;
        let layout = &layouts[0];
        let [b, _, f, h, w] = dims;
        if let Attend::Context(ctx) = &attend {
            ctx.check(self.blocks.len(), b, self.config.num_heads, self.config.head_dim())?;
        }
        let [pt, ph, pw] = self.config.patch_size;
        let (fp, hp, wp) = (f / pt, h / ph, w / pw);
        let device = self.device();
        let rope = Rope::new(self.config.head_dim(), self.config.rope_theta, self.config.rope_max_positions);
        let positions: Vec<&[usize]> = layouts.iter().map(|l| l.positions.as_slice()).collect();
        let rope = rope.table::<B>(&positions, hp, wp, &device)?;
        let roles = RoleSelect::from_frames(&layout.roles, hp * wp, &device);

        // The time embedding, its projection (the modulation input) and the role vectors run in
        // f32 whatever the parameters' dtype; the token path runs in the parameters' dtype.
        let sin = timestep_features::<B>(timesteps, self.config.freq_dim, &device).cast(DType::F32);
        let mut temb = self.time_embedding.forward_f32(sin, silu);
        if let Some(table) = &self.role_embedding {
            temb = temb + self.role_vectors(table, &layout.roles).cast(DType::F32).unsqueeze_dim(0);
        }
        let e = linear_f32(&self.time_projection, silu(temb.clone()));

        let dim = self.config.dim;
        let dtype = self.dtype();
        let mut x = self.patch_embedding.forward(latents.cast(dtype)).reshape([b, fp, hp * wp, dim]);
        let mut published = Vec::with_capacity(if publish { self.blocks.len() } else { 0 });
        let checkpointed = match (&attend, shard) {
            (Attend::Packed(table), None) if self.checkpoint_blocks => Some(table),
            _ => None,
        };
        for (layer, block) in self.blocks.iter().enumerate() {
            if let Some(table) = checkpointed {
                x = checkpointed_block(block, x, e.clone(), &rope, &roles, &text.layers[layer], table, layer);
                continue;
            }
            let pending = block.begin(x, e.clone(), &rope, &roles);
            let keys = match shard {
                None => pending.own.clone(),
                Some(s) => s.exchange.all_gather(layer, pending.own.clone())?,
            };
            let rows = shard.map(|s| s.frames.start * hp * wp..s.frames.end * hp * wp);
            x = block.finish(pending, &keys, rows, &roles, &text.layers[layer], &attend, layer);
            if publish {
                published.push(keys);
            }
        }
        let out = self.head.forward(x, temb).cast(DType::F32);
        Ok((self.unpatchify(out, [fp, hp, wp]), published))
    }

    /// `[frames, dim]` role vector of each frame (zero for `Role::Base`).
    fn role_vectors(&self, table: &Param<Tensor<B, 2>>, roles: &[Role]) -> Tensor<B, 2> {
        let device = self.device();
        let zero_row = Role::ADAPTED.len() as i64;
        let idx: Vec<i64> = roles.iter().map(|r| r.index().map_or(zero_row, |i| i as i64)).collect();
        let padded = Tensor::cat(vec![table.val(), Tensor::zeros([1, self.config.dim], &device)], 0);
        padded.select(0, Tensor::<B, 1, Int>::from_ints(idx.as_slice(), &device))
    }

    /// `[batch, frames, t, pt·ph·pw·C]` → `[batch, C, frames·pt, hp·ph, wp·pw]`.
    fn unpatchify(&self, x: Tensor<B, 4>, [fp, hp, wp]: [usize; 3]) -> Tensor<B, 5> {
        let b = x.dims()[0];
        let [pt, ph, pw] = self.config.patch_size;
        let c = self.config.out_channels;
        // NdArray handles up to 6 dimensions: scatter the patches in two permutes.
        x.reshape([b, fp * hp * wp, pt * ph * pw, c])
            .permute([0, 3, 1, 2])
            .reshape([b * c * fp, hp, wp, pt, ph, pw])
            .permute([0, 3, 1, 4, 2, 5])
            .reshape([b, c, fp * pt, hp * ph, wp * pw])
    }
}
