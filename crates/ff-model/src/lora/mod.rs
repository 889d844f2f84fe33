//! Roles and role LoRA.
//!
//! One backbone serves two roles (paper Sec. 3.2): the planner and the renderer. Each role has a
//! zero-initialised role vector added on the time-embedding path (see `dit::WanDit`) and low-rank
//! adapters on the self-attention q, k, v, o and cross-attention q, o projections. [`LoraLinear`]
//! is a `Linear` with one optional adapter per role; `Role::Base` runs the plain projection.
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
    Planner,
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
    pub const ADAPTED: [Role; 2] = [Role::Planner, Role::Renderer];
}

/// Adapter hyper-parameters (paper: rank 256 on the 1.3B model).
#[derive(Config, Debug)]
pub struct LoraConfig {
    pub rank: usize,
    /// The adapter output is scaled by `alpha / rank`.
    #[config(default = 1.0)]
    pub alpha: f64,
}

/// One low-rank adapter `x ↦ (x·A)·B · alpha/rank`; `B` starts at zero.
#[derive(Module, Debug)]
pub struct LoraAdapter<B: Backend> {
    pub a: Param<Tensor<B, 2>>,
    pub b: Param<Tensor<B, 2>>,
    pub scale: f64,
}

impl LoraConfig {
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

/// A `Linear` with an optional adapter per adapted role (`adapters[role.index()]`).
#[derive(Module, Debug)]
pub struct LoraLinear<B: Backend> {
    pub base: Linear<B>,
    pub adapters: Vec<LoraAdapter<B>>,
}

impl<B: Backend> LoraLinear<B> {
    pub fn new(base: Linear<B>) -> Self {
        Self { base, adapters: Vec::new() }
    }

    /// Adds one adapter per adapted role.
    pub fn with_adapters(mut self, config: &LoraConfig) -> Self {
        let [d_in, d_out] = self.base.weight.dims();
        let device = self.base.weight.device();
        self.adapters = Role::ADAPTED.iter().map(|_| config.init(d_in, d_out, &device)).collect();
        self
    }

    fn delta(&self, role: Role, x: Tensor<B, 3>) -> Option<Tensor<B, 3>> {
        let a = self.adapters.get(role.index()?)?;
        Some(x.matmul(a.a.val().unsqueeze()).matmul(a.b.val().unsqueeze()) * a.scale)
    }

    pub fn forward(&self, x: Tensor<B, 3>, roles: &RoleSelect<B>) -> Tensor<B, 3> {
        let y = self.base.forward(x.clone());
        match roles {
            RoleSelect::Uniform(role) => match self.delta(*role, x) {
                Some(d) => y + d,
                None => y,
            },
            RoleSelect::Mixed(masks) => masks.iter().fold(y, |y, (role, mask)| match self.delta(*role, x.clone()) {
                Some(d) => y + d * mask.clone(),
                None => y,
            }),
        }
    }

    /// The plain projection of `role` with its adapter folded into the weight.
    pub fn merge(&self, role: Role) -> Self {
        let mut base = self.base.clone();
        if let Some(a) = role.index().and_then(|i| self.adapters.get(i)) {
            let w = base.weight.val() + a.a.val().matmul(a.b.val()) * a.scale;
            base.weight = Param::from_tensor(w);
        }
        Self::new(base)
    }
}
