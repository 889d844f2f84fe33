//! Flow-matching noise math of the Wan / Self-Forcing family, on the host in f64.
//!
//! `x_σ = (1 − σ)·x0 + σ·ε`; the model predicts the velocity `v = ε − x0`, so `x0 = x_σ − σ·v`.
//! Between stages a few-step student re-noises its x0 estimate to the next σ with fresh noise.
//! Timesteps live on the 1000-step training scale (`t = 1000·σ`); the shifted table is
//! `σ = shift·s / (1 + (shift − 1)·s)` over `s = 1, 1 − 1/1000, …, 1/1000`.

mod euler;

pub use euler::EulerSampler;

use burn::tensor::{Tensor, backend::Backend};

/// Classifier-free guidance: `v = v_u + g·(v_c − v_u)` from the unconditional (empty-prompt)
/// prediction `v_u` and the conditional one `v_c`. `g = 1` is `v_c`, `g = 0` is `v_u`; the
/// teacher samples at `g = 3`, as Phase 2's real score does.
///
/// ```
/// use burn::backend::NdArray;
/// use burn::tensor::Tensor;
/// use ff_model::flow::cfg;
///
/// let dev = Default::default();
/// let u = Tensor::<NdArray, 1>::from_floats([0.5, -1.0, 2.0], &dev);
/// let c = Tensor::<NdArray, 1>::from_floats([1.5, 0.25, -2.0], &dev);
/// // g = 3 extrapolates past the conditional prediction: u + 3(c − u).
/// let want = Tensor::<NdArray, 1>::from_floats([3.5, 2.75, -10.0], &dev);
/// assert!((cfg(u, c, 3.0) - want).abs().max().into_scalar() < 1e-6);
/// ```
pub fn cfg<B: Backend, const D: usize>(unconditional: Tensor<B, D>, conditional: Tensor<B, D>, guidance: f64) -> Tensor<B, D> {
    unconditional.clone() + (conditional - unconditional) * guidance
}

/// The shifted flow-matching noise schedule.
///
/// ```
/// use burn::backend::NdArray;
/// use burn::tensor::Tensor;
/// use ff_model::FlowMatch;
///
/// let fm = FlowMatch::new(5.0);
/// // The 4-step student's timesteps: 1000, 750, 500, 250 warped by shift 5, then indexed.
/// assert!((fm.warp(750.0) - 937.5).abs() < 1e-9);
/// assert_eq!(fm.student_timesteps(&[1000.0, 750.0, 500.0, 250.0]), vec![999, 937, 833, 624]);
/// assert_eq!((fm.sigma(624.0), fm.timestep(0.937)), (0.624, 937.0));
/// let table = fm.sigmas();
/// assert_eq!((table.len(), table[0]), (1000, 1.0));
/// assert!((table[250] - 0.9375).abs() < 1e-12); // the shift of 0.75: 3.75 / 4
///
/// // x0 = x_σ − σ·v undoes the noising x_σ = (1 − σ)·x0 + σ·ε with v = ε − x0.
/// let dev = Default::default();
/// let x0 = Tensor::<NdArray, 1>::from_floats([0.5, -1.0, 2.0], &dev);
/// let eps = Tensor::<NdArray, 1>::from_floats([1.0, 0.25, -0.5], &dev);
/// let xs = FlowMatch::noise(x0.clone(), eps.clone(), 0.8125);
/// let back = FlowMatch::x0_from_v(xs, FlowMatch::velocity(x0.clone(), eps), 0.8125);
/// assert!((back - x0).abs().max().into_scalar() < 1e-6);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FlowMatch {
    /// Timestep shift (5.0 for Wan2.1 T2V few-step students).
    pub shift: f64,
    /// Training steps of the table (1000).
    pub train_steps: usize,
}

impl Default for FlowMatch {
    fn default() -> Self {
        Self { shift: 5.0, train_steps: 1000 }
    }
}

impl FlowMatch {
    /// The 1000-step table at `shift`.
    pub fn new(shift: f64) -> Self {
        Self { shift, ..Self::default() }
    }

    /// Applies the shift to an unshifted σ in [0, 1].
    pub fn shift_sigma(&self, s: f64) -> f64 {
        self.shift * s / (1.0 + (self.shift - 1.0) * s)
    }

    /// The shifted σ table, descending from 1: entry `i` is the shift of `1 − i/train_steps`.
    pub fn sigmas(&self) -> Vec<f64> {
        let n = self.train_steps as f64;
        (0..self.train_steps).map(|i| self.shift_sigma(1.0 - i as f64 / n)).collect()
    }

    /// The table's timesteps (`train_steps · σ`), descending from `train_steps`.
    pub fn timesteps(&self) -> Vec<f64> {
        let n = self.train_steps as f64;
        self.sigmas().into_iter().map(|s| s * n).collect()
    }

    /// σ of a timestep on the training scale.
    pub fn sigma(&self, timestep: f64) -> f64 {
        timestep / self.train_steps as f64
    }

    /// Timestep of a σ on the training scale.
    pub fn timestep(&self, sigma: f64) -> f64 {
        sigma * self.train_steps as f64
    }

    /// Warps an unshifted timestep (e.g. a student's 1000/750/500/250) through the shifted table:
    /// the table entry at index `train_steps − t`.
    pub fn warp(&self, timestep: f64) -> f64 {
        let n = self.train_steps as f64;
        self.timestep(self.shift_sigma(timestep / n))
    }

    /// Integer index of a timestep in `0..train_steps` (the step whose interval `(k, k+1]` holds it).
    pub fn index(&self, timestep: f64) -> usize {
        let k = timestep.ceil() as i64 - 1;
        k.clamp(0, self.train_steps as i64 - 1) as usize
    }

    /// Student timestep indices for unshifted denoising steps: warp, then index.
    /// `[1000, 750, 500, 250]` at shift 5 gives `[999, 937, 833, 624]`.
    pub fn student_timesteps(&self, steps: &[f64]) -> Vec<usize> {
        steps.iter().map(|&t| self.index(self.warp(t))).collect()
    }

    /// x0 estimate from a velocity prediction at noise level σ: `x0 = x_σ − σ·v`.
    pub fn x0_from_v<B: Backend, const D: usize>(x: Tensor<B, D>, v: Tensor<B, D>, sigma: f64) -> Tensor<B, D> {
        x - v * sigma
    }

    /// Noises a clean sample to level σ: `(1 − σ)·x0 + σ·ε`.
    pub fn noise<B: Backend, const D: usize>(x0: Tensor<B, D>, eps: Tensor<B, D>, sigma: f64) -> Tensor<B, D> {
        x0 * (1.0 - sigma) + eps * sigma
    }

    /// The velocity target `v = ε − x0` of a training sample.
    pub fn velocity<B: Backend, const D: usize>(x0: Tensor<B, D>, eps: Tensor<B, D>) -> Tensor<B, D> {
        eps - x0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warped_student_steps_match_self_forcing() {
        let fm = FlowMatch::new(5.0);
        let warped: Vec<f64> = [1000.0, 750.0, 500.0, 250.0].iter().map(|&t| fm.warp(t)).collect();
        let want = [1000.0, 937.5, 833.333_333_333_333_3, 625.0];
        for (w, e) in warped.iter().zip(want) {
            assert!((w - e).abs() < 1e-9, "{w} vs {e}");
        }
        assert_eq!(fm.student_timesteps(&[1000.0, 750.0, 500.0, 250.0]), vec![999, 937, 833, 624]);
    }

    #[test]
    fn table_is_shifted_and_descending() {
        let fm = FlowMatch::new(5.0);
        let s = fm.sigmas();
        assert_eq!(s.len(), 1000);
        assert_eq!(s[0], 1.0);
        // entry 250 is the shift of 0.75: 3.75 / 4
        assert!((s[250] - 0.9375).abs() < 1e-12);
        assert!((s[999] - 5e-3 / (1.0 + 4e-3)).abs() < 1e-12);
        assert!(s.windows(2).all(|w| w[0] > w[1]));
        // the table's timesteps are the warps of 1000 − i
        let t = fm.timesteps();
        assert!((t[500] - fm.warp(500.0)).abs() < 1e-9);
    }

    #[test]
    fn sigma_and_timestep_round_trip() {
        let fm = FlowMatch::default();
        assert_eq!(fm.sigma(624.0), 0.624);
        assert_eq!(fm.timestep(0.937), 937.0);
        assert_eq!(fm.index(0.0), 0);
        assert_eq!(fm.index(1000.0), 999);
    }

    #[test]
    fn guidance_one_is_conditional_zero_unconditional() {
        use burn::backend::NdArray;
        let dev = Default::default();
        let u = Tensor::<NdArray, 1>::from_floats([0.5, -1.0, 2.0], &dev);
        let c = Tensor::<NdArray, 1>::from_floats([1.5, 0.25, -2.0], &dev);
        let close = |a: Tensor<NdArray, 1>, b: Tensor<NdArray, 1>| (a - b).abs().max().into_scalar() < 1e-6;
        assert!(close(cfg(u.clone(), c.clone(), 1.0), c.clone()));
        assert!(close(cfg(u.clone(), c.clone(), 0.0), u.clone()));
        // g = 3 extrapolates past the conditional prediction: u + 3(c − u)
        assert!(close(cfg(u, c, 3.0), Tensor::from_floats([3.5, 2.75, -10.0], &dev)));
    }

    #[test]
    fn x0_from_v_inverts_noise() {
        use burn::backend::NdArray;
        let dev = Default::default();
        let x0 = Tensor::<NdArray, 1>::from_floats([0.5, -1.0, 2.0], &dev);
        let eps = Tensor::<NdArray, 1>::from_floats([1.0, 0.25, -0.5], &dev);
        let sigma = 0.8125;
        let xs = FlowMatch::noise(x0.clone(), eps.clone(), sigma);
        let v = FlowMatch::velocity(x0.clone(), eps);
        let back = FlowMatch::x0_from_v(xs, v, sigma);
        let d: f32 = (back - x0).abs().max().into_scalar();
        assert!(d < 1e-6);
    }
}
