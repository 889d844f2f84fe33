//! Row kernels of the CPU attention in f32, written as fixed 16-lane loops the compiler
//! vectorises: exp (Cephes `expf` polynomial, ≤ 2 ulp), row max, dot product; and the tanh-form
//! GELU and its derivative on the same exp. Sums use 16 lane
//! accumulators reduced in a fixed order, so a result depends only on the row, never on the
//! thread or the instruction set: the AVX-512 / AVX2 builds chosen at run time compute the same
//! bits as the baseline build (no fused multiply-add is formed).

const LANES: usize = 16;

/// Below this, `exp` returns 0 (the true value is under 1.7e-38).
const EXP_LOW: f32 = -87.0;
const EXP_HIGH: f32 = 88.0;
/// 1.5 · 2²³: adding it rounds an f32 of magnitude < 2²² to an integer held in the low mantissa bits.
const ROUND_MAGIC: f32 = 12_582_912.0;
const LN2_HI: f32 = 0.693_359_4;
const LN2_LO: f32 = -2.121_944_4e-4;

#[inline(always)]
fn exp1(x: f32) -> f32 {
    let c = if x > EXP_HIGH { EXP_HIGH } else { x };
    let c = if c < EXP_LOW { EXP_LOW } else { c };
    let t = c * std::f32::consts::LOG2_E + ROUND_MAGIC;
    let n = t - ROUND_MAGIC;
    let r = c - n * LN2_HI - n * LN2_LO;
    let mut p = 1.987_569_2e-4;
    p = p * r + 1.398_199_9e-3;
    p = p * r + 8.333_452e-3;
    p = p * r + 4.166_579_6e-2;
    p = p * r + 0.166_666_65;
    p = p * r + 0.5;
    let y = p * r * r + r + 1.0;
    let e = (t.to_bits() as i32 - ROUND_MAGIC.to_bits() as i32 + 127) << 23;
    let y = y * f32::from_bits(e as u32);
    if x < EXP_LOW { 0.0 } else { y }
}

fn reduce(mut acc: [f32; LANES]) -> f32 {
    let mut width = LANES / 2;
    while width > 0 {
        for i in 0..width {
            acc[i] += acc[i + width];
        }
        width /= 2;
    }
    acc[0]
}

#[inline(always)]
fn exp_shifted_body(xs: &mut [f32], shift: f32) -> f32 {
    let mut acc = [0.0f32; LANES];
    let mut chunks = xs.chunks_exact_mut(LANES);
    for chunk in &mut chunks {
        for (a, x) in acc.iter_mut().zip(chunk.iter_mut()) {
            *x = exp1(*x - shift);
            *a += *x;
        }
    }
    for (a, x) in acc.iter_mut().zip(chunks.into_remainder()) {
        *x = exp1(*x - shift);
        *a += *x;
    }
    reduce(acc)
}

#[inline(always)]
fn max_body(xs: &[f32]) -> f32 {
    let mut acc = [f32::NEG_INFINITY; LANES];
    let mut chunks = xs.chunks_exact(LANES);
    for chunk in &mut chunks {
        for (a, &x) in acc.iter_mut().zip(chunk) {
            *a = if x > *a { x } else { *a };
        }
    }
    for (a, &x) in acc.iter_mut().zip(chunks.remainder()) {
        *a = if x > *a { x } else { *a };
    }
    acc.into_iter().fold(f32::NEG_INFINITY, |m, x| if x > m { x } else { m })
}

#[inline(always)]
fn dot_body(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0.0f32; LANES];
    let (ca, cb) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for i in 0..LANES {
            acc[i] += x[i] * y[i];
        }
    }
    for (i, (x, y)) in ra.iter().zip(rb).enumerate() {
        acc[i] += x * y;
    }
    reduce(acc)
}

/// √(2/π) and the cubic coefficient of the tanh-form GELU.
const GELU_K: f32 = 0.797_884_6;
const GELU_C: f32 = 0.044_715;

/// `out[i] = gelu(x[i])` in the form `x·σ(2u)`, `u = √(2/π)·(x + 0.044715·x³)`, which equals
/// `0.5·x·(1 + tanh u)`; `σ(2u) = 1 / (1 + exp(−2u))` (`exp` saturates at `e⁸⁸`, so very negative
/// inputs give −0 and very positive ones `x`).
#[inline(always)]
fn gelu_tanh_body(x: &[f32], out: &mut [f32]) {
    for (o, &x) in out.iter_mut().zip(x) {
        let u = GELU_K * (x + GELU_C * x * x * x);
        *o = x / (1.0 + exp1(-2.0 * u));
    }
}

/// `out[i] = grad[i] · gelu′(x[i])`, `gelu′ = s + x·s·(1 − s)·2u′`, `s = σ(2u)`,
/// `u′ = √(2/π)·(1 + 3·0.044715·x²)`.
#[inline(always)]
fn gelu_tanh_grad_body(x: &[f32], grad: &[f32], out: &mut [f32]) {
    for ((o, &x), &g) in out.iter_mut().zip(x).zip(grad) {
        let u = GELU_K * (x + GELU_C * x * x * x);
        let s = 1.0 / (1.0 + exp1(-2.0 * u));
        let du = GELU_K * (1.0 + 3.0 * GELU_C * x * x);
        *o = g * (s + x * s * (1.0 - s) * 2.0 * du);
    }
}

/// Dispatches `$body($args)` to an AVX-512 or AVX2 build of it when the CPU has one.
macro_rules! dispatch {
    ($body:ident($($arg:ident: $ty:ty),*) -> $ret:ty) => {{
        #[cfg(target_arch = "x86_64")]
        {
            #[target_feature(enable = "avx512f")]
            fn avx512($($arg: $ty),*) -> $ret { $body($($arg),*) }
            #[target_feature(enable = "avx2")]
            fn avx2($($arg: $ty),*) -> $ret { $body($($arg),*) }
            if std::arch::is_x86_feature_detected!("avx512f") {
                // SAFETY: the CPU has the feature the build needs.
                return unsafe { avx512($($arg),*) };
            }
            if std::arch::is_x86_feature_detected!("avx2") {
                // SAFETY: as above.
                return unsafe { avx2($($arg),*) };
            }
        }
        $body($($arg),*)
    }};
}

/// `xs[i] = exp(xs[i] - shift)`; returns the sum of the new values.
pub fn exp_shifted(xs: &mut [f32], shift: f32) -> f32 {
    dispatch!(exp_shifted_body(xs: &mut [f32], shift: f32) -> f32)
}

/// The largest element (−∞ for an empty slice).
pub fn max(xs: &[f32]) -> f32 {
    dispatch!(max_body(xs: &[f32]) -> f32)
}

/// Σ a[i]·b[i] over the common length.
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    dispatch!(dot_body(a: &[f32], b: &[f32]) -> f32)
}

/// `out[i] = gelu_tanh(x[i])` over the common length.
pub fn gelu_tanh(x: &[f32], out: &mut [f32]) {
    dispatch!(gelu_tanh_body(x: &[f32], out: &mut [f32]) -> ())
}

/// `out[i] = grad[i] · gelu_tanh′(x[i])` over the common length.
pub fn gelu_tanh_grad(x: &[f32], grad: &[f32], out: &mut [f32]) {
    dispatch!(gelu_tanh_grad_body(x: &[f32], grad: &[f32], out: &mut [f32]) -> ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_is_within_two_ulp_of_f64_exp_over_the_softmax_range() {
        // Softmax feeds exp scores minus the row max: (-87, 0], plus a little rounding above 0.
        let xs: Vec<f32> = (0..200_001).map(|i| -87.0 + 88.0 * i as f32 / 200_000.0).collect();
        let mut ys = xs.clone();
        exp_shifted(&mut ys, 0.0);
        let worst = xs.iter().zip(&ys).map(|(&x, &y)| ((y as f64 - (x as f64).exp()) / (x as f64).exp()).abs()).fold(0.0, f64::max);
        assert!(worst < 2.5e-7, "max relative error {worst}");
        let mut tiny = [-87.5f32, -200.0, f32::NEG_INFINITY];
        assert_eq!(exp_shifted(&mut tiny, 0.0), 0.0);
    }

    #[test]
    fn the_vector_builds_compute_the_baseline_bits() {
        let xs: Vec<f32> = (0..1000).map(|i| ((i * 7919) % 1013) as f32 / 37.0 - 20.0).collect();
        let (mut fast, mut base) = (xs.clone(), xs.clone());
        assert_eq!(exp_shifted(&mut fast, 3.0).to_bits(), exp_shifted_body(&mut base, 3.0).to_bits());
        assert_eq!(fast, base);
        assert_eq!(dot(&xs, &fast).to_bits(), dot_body(&xs, &base).to_bits());
        assert_eq!(max(&xs[..999]), xs[..999].iter().cloned().fold(f32::NEG_INFINITY, f32::max));
        let (mut fast, mut base) = (vec![0.0; xs.len()], vec![0.0; xs.len()]);
        gelu_tanh(&xs, &mut fast);
        gelu_tanh_body(&xs, &mut base);
        assert_eq!(fast, base);
        gelu_tanh_grad(&xs, &ys(&xs), &mut fast);
        gelu_tanh_grad_body(&xs, &ys(&xs), &mut base);
        assert_eq!(fast, base);
    }

    fn ys(xs: &[f32]) -> Vec<f32> {
        xs.iter().map(|x| 1.0 - x / 40.0).collect()
    }

    /// Against `0.5·x·(1 + tanh u)` and its derivative in f64, over the range activations take
    /// and beyond (where the exp saturates).
    #[test]
    fn gelu_tanh_and_its_derivative_match_the_tanh_formula_in_f64() {
        let xs: Vec<f32> = (0..20_001).map(|i| -60.0 + 120.0 * i as f32 / 20_000.0).collect();
        let (mut out, mut grad) = (vec![0.0; xs.len()], vec![0.0; xs.len()]);
        gelu_tanh(&xs, &mut out);
        gelu_tanh_grad(&xs, &vec![1.0; xs.len()], &mut grad);
        let k = (2.0 / std::f64::consts::PI).sqrt();
        for ((&x, &y), &dy) in xs.iter().zip(&out).zip(&grad) {
            let x = f64::from(x);
            let t = (k * (x + 0.044715 * x * x * x)).tanh();
            let want = 0.5 * x * (1.0 + t);
            let dwant = 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * k * (1.0 + 3.0 * 0.044715 * x * x);
            assert!((f64::from(y) - want).abs() <= 1e-6 * (1.0 + want.abs()), "gelu({x}) = {y}, want {want}");
            assert!((f64::from(dy) - dwant).abs() <= 2e-6 * (1.0 + dwant.abs()), "gelu'({x}) = {dy}, want {dwant}");
        }
    }
}
