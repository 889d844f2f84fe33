//! Roles and role LoRA.
//!
//! One backbone serves two roles (paper Sec. 3.2): the planner and the renderer. Each role has a
//! zero-initialised role vector added on the time-embedding path (see `dit::WanDit`) and low-rank
//! adapters on the self-attention q, k, v, o and cross-attention q, o projections. [`LoraLinear`]
//! is a `Linear` with one optional adapter per role; `Role::Base` runs the plain projection. With
//! `LoraConfig::shared` both roles use one adapter (the paper's Tab. 3 ablation of role
//! specialisation: the role vectors alone tell the roles apart).
//! Shapes: input `[batch, tokens, in]`, adapter `A: [in, rank]`, `B: [rank, out]`.

use burn::config::Config;
use burn::module::{Module, Param};
use burn::nn::Linear;
use burn::tensor::{Distribution, Tensor, TensorData, backend::Backend};

/// Which role a frame's tokens play in a forward.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Role {
    /// The plain backbone: no role vector, no adapter.
    Base,
    /// Generates the sparse clean anchor latents (role row 0, adapter 0).
    Planner,
    /// Renders every latent position in chunks (role row 1, adapter 1).
    Renderer,
}

impl Role {
    /// Row of the role-embedding table and index of the role's adapter.
    pub fn index(self) -> Option<usize> {
        match self {
            Role::Base => None,
            Role::Planner => Some(0),
            Role::Renderer => Some(1),
        }
    }
    /// The roles with a role vector and an adapter, in index order.
    pub const ADAPTED: [Role; 2] = [Role::Planner, Role::Renderer];
}

/// Adapter hyper-parameters (paper: rank 256 on the 1.3B model).
#[derive(Config, Debug)]
pub struct LoraConfig {
    /// Rank r of `A: [in, r]` and `B: [r, out]`.
    pub rank: usize,
    /// The adapter output is scaled by `alpha / rank`.
    #[config(default = 1.0)]
    pub alpha: f64,
    /// One adapter both roles share instead of one per role.
    #[config(default = false)]
    pub shared: bool,
}

/// One low-rank adapter `x ↦ (x·A)·B · alpha/rank`; `B` starts at zero.
#[derive(Module, Debug)]
pub struct LoraAdapter<B: Backend> {
    /// `A: [in, rank]`, initialised from N(0, 1/rank).
    pub a: Param<Tensor<B, 2>>,
    /// `B: [rank, out]`, initialised to zero.
    pub b: Param<Tensor<B, 2>>,
    /// `alpha / rank`.
    pub scale: f64,
}

impl LoraConfig {
    /// A fresh adapter for a `d_in → d_out` projection: `A` from N(0, 1/rank), `B` zero, so it
    /// adds nothing until trained.
    pub fn init<B: Backend>(&self, d_in: usize, d_out: usize, device: &B::Device) -> LoraAdapter<B> {
        let std = 1.0 / (self.rank as f64).sqrt();
        LoraAdapter {
            a: Param::from_tensor(Tensor::random([d_in, self.rank], Distribution::Normal(0.0, std), device)),
            b: Param::from_tensor(Tensor::zeros([self.rank, d_out], device)),
            scale: self.alpha / self.rank as f64,
        }
    }
}

/// Per-token role selection of one forward, built once and shared by every adapted projection.
#[derive(Clone, Debug)]
pub enum RoleSelect<B: Backend> {
    /// Every token plays this role.
    Uniform(Role),
    /// Mixed roles (packed training sequences): for each adapted role present, a `[1, tokens, 1]`
    /// 0/1 mask of its tokens.
    Mixed(Vec<(Role, Tensor<B, 3>)>),
}

impl<B: Backend> RoleSelect<B> {
    /// From per-frame roles with `tokens_per_frame` tokens each.
    pub fn from_frames(roles: &[Role], tokens_per_frame: usize, device: &B::Device) -> Self {
        if roles.windows(2).all(|w| w[0] == w[1]) {
            return Self::Uniform(roles.first().copied().unwrap_or(Role::Base));
        }
        let n = roles.len() * tokens_per_frame;
        let masks = Role::ADAPTED
            .into_iter()
            .filter(|r| roles.contains(r))
            .map(|r| {
                let m: Vec<f32> = roles.iter().flat_map(|x| std::iter::repeat_n((*x == r) as u8 as f32, tokens_per_frame)).collect();
                (r, Tensor::from_data(TensorData::new(m, [1, n, 1]), device))
            })
            .collect();
        Self::Mixed(masks)
    }
}

/// A `Linear` with an optional adapter per adapted role (`adapters[role.index()]`), or one both
/// roles share (a single adapter).
#[derive(Module, Debug)]
pub struct LoraLinear<B: Backend> {
    /// The plain projection.
    pub base: Linear<B>,
    /// No adapter, one per adapted role, or one shared.
    pub adapters: Vec<LoraAdapter<B>>,
}

impl<B: Backend> LoraLinear<B> {
    /// `base` without adapters.
    pub fn new(base: Linear<B>) -> Self {
        Self { base, adapters: Vec::new() }
    }

    /// Adds one adapter per adapted role, or one shared one.
    pub fn with_adapters(mut self, config: &LoraConfig) -> Self {
        let [d_in, d_out] = self.base.weight.dims();
        let device = self.base.weight.device();
        let count = if config.shared { 1 } else { Role::ADAPTED.len() };
        self.adapters = (0..count).map(|_| config.init(d_in, d_out, &device)).collect();
        self
    }

    /// The adapter of `role`: its own, or the shared one.
    fn adapter(&self, role: Role) -> Option<&LoraAdapter<B>> {
        self.adapters.get(role.index()?.min(self.adapters.len().saturating_sub(1)))
    }

    fn delta(&self, role: Role, x: Tensor<B, 3>) -> Option<Tensor<B, 3>> {
        let a = self.adapter(role)?;
        Some(x.matmul(a.a.val().unsqueeze()).matmul(a.b.val().unsqueeze()) * a.scale)
    }

    /// `x: [batch, tokens, in]` → `[batch, tokens, out]`: the base projection plus each token's
    /// role adapter (none for [`Role::Base`] or without adapters).
    pub fn forward(&self, x: Tensor<B, 3>, roles: &RoleSelect<B>) -> Tensor<B, 3> {
        let y = self.base.forward(x.clone());
        match roles {
            RoleSelect::Uniform(role) => match self.delta(*role, x) {
                Some(d) => y + d,
                None => y,
            },
            RoleSelect::Mixed(masks) => match self.mixed_delta(x, masks) {
                Some(d) => y + d,
                None => y,
            },
        }
    }

    /// `Σ_role mask_role ⊙ delta_role(x)` as one product pair: `x·[A₁ … Aₙ]` with each role's
    /// rank columns gated by its token mask × scale, then `·[B₁; …; Bₙ]`. The masks and scales
    /// act on the `[tokens, Σ rank]` intermediate instead of on `n` products of `[tokens, out]`,
    /// and the `n` pairs of thin products become one.
    fn mixed_delta(&self, x: Tensor<B, 3>, masks: &[(Role, Tensor<B, 3>)]) -> Option<Tensor<B, 3>> {
        let parts: Vec<_> = masks.iter().filter_map(|(role, mask)| Some((self.adapter(*role)?, mask))).collect();
        if parts.is_empty() {
            return None;
        }
        let dtype = x.dtype();
        let a = Tensor::cat(parts.iter().map(|(a, _)| a.a.val()).collect(), 1);
        let b = Tensor::cat(parts.iter().map(|(a, _)| a.b.val()).collect(), 0);
        let gate = parts.iter().map(|(a, mask)| (Tensor::clone(mask).cast(dtype) * a.scale).repeat_dim(2, a.a.dims()[1])).collect();
        Some((x.matmul(a.unsqueeze()) * Tensor::cat(gate, 2)).matmul(b.unsqueeze()))
    }

    /// The plain projection of `role` with its adapter folded into the weight.
    pub fn merge(&self, role: Role) -> Self {
        let mut base = self.base.clone();
        if let Some(a) = self.adapter(role) {
            let w = base.weight.val() + a.a.val().matmul(a.b.val()) * a.scale;
            base.weight = Param::from_tensor(w);
        }
        Self::new(base)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::NdArray;
    use burn::nn::LinearConfig;

    type B = NdArray<f32>;

    /// A projection whose adapters are non-zero (B starts at zero) and differ per role.
    fn adapted(shared: bool) -> LoraLinear<B> {
        let device = Default::default();
        let mut l = LoraLinear::new(LinearConfig::new(6, 5).init::<B>(&device)).with_adapters(&LoraConfig::new(2).with_shared(shared));
        for (i, a) in l.adapters.iter_mut().enumerate() {
            a.b = Param::from_tensor(Tensor::ones([2, 5], &device) * (i as f32 + 1.0));
        }
        l
    }

    fn run(l: &LoraLinear<B>, role: Role) -> Vec<f32> {
        let x = Tensor::<B, 1>::from_floats([0.5, -1.0, 2.0, 0.25, 1.5, -0.75], &Default::default()).reshape([1, 1, 6]);
        l.forward(x, &RoleSelect::Uniform(role)).into_data().to_vec().unwrap()
    }

    /// Mixed roles against the role-by-role formula `y + Σ mask_r ⊙ (x·A_r·B_r·scale)`, with
    /// separate and shared adapters.
    #[test]
    fn a_mixed_forward_is_the_masked_sum_of_the_roles_deltas() {
        let device = Default::default();
        let x = Tensor::<B, 3>::random([2, 4, 6], burn::tensor::Distribution::Normal(0.0, 1.0), &device);
        let roles = RoleSelect::<B>::from_frames(&[Role::Planner, Role::Renderer], 2, &device);
        let RoleSelect::Mixed(masks) = &roles else { panic!("two roles make a mixed selection") };
        for shared in [false, true] {
            let l = adapted(shared);
            let want = masks.iter().fold(l.base.forward(x.clone()), |y, (role, mask)| {
                let a = l.adapter(*role).unwrap();
                y + x.clone().matmul(a.a.val().unsqueeze()).matmul(a.b.val().unsqueeze()) * a.scale * mask.clone()
            });
            let diff: f32 = (l.forward(x.clone(), &roles) - want).abs().max().into_scalar();
            assert!(diff < 1e-5, "shared = {shared}: differs by {diff}");
        }
    }

    #[test]
    fn shared_adapters_serve_both_roles_alike_and_per_role_ones_do_not() {
        let (own, shared) = (adapted(false), adapted(true));
        assert_eq!((own.adapters.len(), shared.adapters.len()), (2, 1));
        assert_ne!(run(&own, Role::Planner), run(&own, Role::Renderer));
        assert_eq!(run(&shared, Role::Planner), run(&shared, Role::Renderer));
        assert_ne!(run(&shared, Role::Planner), run(&shared, Role::Base), "the shared adapter is applied");
        for role in Role::ADAPTED {
            let merged = shared.merge(role);
            let (a, b) = (run(&merged, Role::Base), run(&shared, role));
            assert!(a.iter().zip(&b).all(|(x, y)| (x - y).abs() < 1e-5), "{role:?}: merged {a:?} vs adapted {b:?}");
        }
    }
}
