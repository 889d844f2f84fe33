//! [`EulerSampler`]: the many-step sampler of a bidirectional flow-matching model (the teacher).
//!
//! `N` Euler steps of the ODE `dx/dσ = v` from pure noise at σ = 1 to the clean sample at σ = 0,
//! over the shifted grid `σ_i = shift(1 − i/N)`, `i = 0..=N` (`σ_N = 0`):
//! `x_{i+1} = x_i + (σ_{i+1} − σ_i)·v(x_i, 1000·σ_i)`. Unlike the few-step students' stages, no
//! fresh noise is drawn between steps. Shapes: whatever the velocity function takes (the DiT's
//! `[batch, C, frames, h, w]`).

use super::FlowMatch;
use burn::tensor::{Tensor, backend::Backend};

/// `steps` Euler steps over the σ grid of `flow` (its shift).
///
/// ```
/// use burn::backend::NdArray;
/// use burn::tensor::Tensor;
/// use ff_model::flow::EulerSampler;
///
/// let s = EulerSampler::new(4, 5.0).sigmas();
/// assert_eq!((s.len(), s[0], s[4]), (5, 1.0, 0.0));
/// assert!((s[2] - 2.5 / 3.0).abs() < 1e-12); // the shift 5 of 0.5
///
/// // The true velocity ε − x0 of the straight path makes Euler exact: it lands on x0,
/// // one velocity call per step, the first at t = 1000.
/// let dev = Default::default();
/// let x0 = Tensor::<NdArray, 1>::from_floats([0.5, -1.0, 2.0], &dev);
/// let eps = Tensor::<NdArray, 1>::from_floats([1.0, 0.25, -0.5], &dev);
/// let mut calls = Vec::new();
/// let out = EulerSampler::new(7, 3.0)
///     .sample(eps.clone(), |_, t| {
///         calls.push(t);
///         Ok::<_, ()>(eps.clone() - x0.clone())
///     })
///     .unwrap();
/// assert!((out - x0).abs().max().into_scalar() < 1e-5);
/// assert_eq!((calls.len(), calls[0]), (7, 1000.0));
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EulerSampler {
    /// Euler steps N (velocity calls).
    pub steps: usize,
    /// The flow-matching schedule whose shift warps the grid.
    pub flow: FlowMatch,
}

impl EulerSampler {
    /// `steps` steps on the grid shifted by `shift`.
    pub fn new(steps: usize, shift: f64) -> Self {
        Self { steps, flow: FlowMatch::new(shift) }
    }

    /// The σ grid: `steps + 1` values from 1 down to 0.
    pub fn sigmas(&self) -> Vec<f64> {
        let n = self.steps as f64;
        (0..=self.steps).map(|i| self.flow.shift_sigma(1.0 - i as f64 / n)).collect()
    }

    /// Integrates from `noise` (σ = 1) to σ = 0. `velocity(x, timestep)` is the model's
    /// prediction at a timestep on the 1000 scale (guided or not); its error stops the sampling.
    pub fn sample<B: Backend, const D: usize, E>(
        &self,
        noise: Tensor<B, D>,
        mut velocity: impl FnMut(Tensor<B, D>, f64) -> Result<Tensor<B, D>, E>,
    ) -> Result<Tensor<B, D>, E> {
        let sigmas = self.sigmas();
        let mut x = noise;
        for pair in sigmas.windows(2) {
            let v = velocity(x.clone(), self.flow.timestep(pair[0]))?;
            x = x + v * (pair[1] - pair[0]);
        }
        Ok(x)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::NdArray;

    #[test]
    fn grid_runs_from_one_to_zero_through_the_shift() {
        let s = EulerSampler::new(4, 5.0).sigmas();
        assert_eq!(s.len(), 5);
        assert_eq!((s[0], s[4]), (1.0, 0.0));
        // shift 5 of 0.5: 2.5 / 3
        assert!((s[2] - 2.5 / 3.0).abs() < 1e-12);
    }

    #[test]
    fn exact_velocity_lands_on_the_data_and_each_step_is_one_call() {
        // For x_σ = (1 − σ)·x0 + σ·ε the true velocity is ε − x0 at every σ: Euler is exact.
        let dev = Default::default();
        let x0 = Tensor::<NdArray, 1>::from_floats([0.5, -1.0, 2.0], &dev);
        let eps = Tensor::<NdArray, 1>::from_floats([1.0, 0.25, -0.5], &dev);
        let mut calls = Vec::new();
        let out = EulerSampler::new(7, 3.0)
            .sample(eps.clone(), |_, t| {
                calls.push(t);
                Ok::<_, ()>(eps.clone() - x0.clone())
            })
            .unwrap();
        assert!((out - x0).abs().max().into_scalar() < 1e-5);
        assert_eq!(calls.len(), 7);
        assert_eq!(calls[0], 1000.0);
        assert!(calls.windows(2).all(|w| w[0] > w[1]) && calls[6] > 0.0);
    }
}
