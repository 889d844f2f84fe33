//! Element kernels of the CPU attention in f32, written as fixed 16-lane loops the compiler
//! vectorises: exp (Cephes `expf` polynomial with fused multiply-adds, ≤ 2 ulp), the online
//! softmax step and the softmax gradient on column-major score tiles (16 query rows per vector,
//! keys in order), the dot product; and the tanh-form GELU and its derivative on the same exp.
//! Sums run in a fixed order (the dot product's 16 lane accumulators are reduced as a tree), so a
//! result depends only on its inputs, never on the thread or the instruction set: the AVX-512 /
//! AVX2+FMA builds chosen at run time compute the same bits as the baseline build, whose
//! `mul_add` is the correctly rounded software fma.

/// Lanes of the fixed-width loops (one AVX-512 register of f32).
pub const LANES: usize = 16;

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
    let t = c.mul_add(std::f32::consts::LOG2_E, ROUND_MAGIC);
    let n = t - ROUND_MAGIC;
    let r = n.mul_add(-LN2_LO, n.mul_add(-LN2_HI, c));
    let mut p: f32 = 1.987_569_2e-4;
    p = p.mul_add(r, 1.398_199_9e-3);
    p = p.mul_add(r, 8.333_452e-3);
    p = p.mul_add(r, 4.166_579_6e-2);
    p = p.mul_add(r, 0.166_666_65);
    p = p.mul_add(r, 0.5);
    let y = (p * r).mul_add(r, r) + 1.0;
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

#[inline(always)]
fn softmax_step_body(s: &mut [f32], ld: usize, max: &mut [f32], sum: &mut [f32], corr: &mut [f32]) {
    let n = s.len() / ld;
    for i0 in (0..ld).step_by(LANES) {
        let rows = i0..i0 + LANES;
        let mut mx: [f32; LANES] = max[rows.clone()].try_into().expect("16 rows");
        for col in s[i0..].chunks(ld) {
            let col: &[f32; LANES] = col[..LANES].try_into().expect("16 rows");
            for l in 0..LANES {
                mx[l] = if col[l] > mx[l] { col[l] } else { mx[l] };
            }
        }
        let mut acc = [0.0f32; LANES];
        for j in 0..n {
            let col: &mut [f32; LANES] = (&mut s[j * ld + i0..][..LANES]).try_into().expect("16 rows");
            for ((x, a), &m) in col.iter_mut().zip(acc.iter_mut()).zip(&mx) {
                *x = exp1(*x - m);
                *a += *x;
            }
        }
        for (l, i) in rows.enumerate() {
            let c = if max[i] == f32::NEG_INFINITY { 0.0 } else { exp1(max[i] - mx[l]) };
            (corr[i], sum[i], max[i]) = (c, sum[i] * c + acc[l], mx[l]);
        }
    }
}

/// `x[i0..i0 + 16]`, zero past the end of `x`.
#[inline(always)]
fn block(x: &[f32], i0: usize) -> [f32; LANES] {
    let mut out = [0.0f32; LANES];
    let w = LANES.min(x.len().saturating_sub(i0));
    out[..w].copy_from_slice(&x[i0..i0 + w]);
    out
}

#[inline(always)]
fn softmax_grad_body(p: &mut [f32], ds: &mut [f32], ld: usize, lse: &[f32], delta: &[f32]) {
    let n = p.len() / ld;
    for i0 in (0..ld).step_by(LANES) {
        let (lse, delta) = (block(lse, i0), block(delta, i0));
        for j in 0..n {
            let at = j * ld + i0;
            let pc: &mut [f32; LANES] = (&mut p[at..][..LANES]).try_into().expect("16 rows");
            let dc: &mut [f32; LANES] = (&mut ds[at..][..LANES]).try_into().expect("16 rows");
            for l in 0..LANES {
                let e = exp1(pc[l] - lse[l]);
                (pc[l], dc[l]) = (e, e * (dc[l] - delta[l]));
            }
        }
    }
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

/// Dispatches `$body($args)` to an AVX-512 or AVX2 build of it when the CPU has one (`$body`
/// marked `#[inline(always)]`, so that each build compiles its own copy).
macro_rules! dispatch {
    ($body:ident($($arg:ident: $ty:ty),*) -> $ret:ty) => {{
        #[cfg(target_arch = "x86_64")]
        {
            #[target_feature(enable = "avx512f")]
            fn avx512($($arg: $ty),*) -> $ret { $body($($arg),*) }
            #[target_feature(enable = "avx2,fma")]
            fn avx2($($arg: $ty),*) -> $ret { $body($($arg),*) }
            if std::arch::is_x86_feature_detected!("avx512f") {
                // SAFETY: the CPU has the feature the build needs.
                return unsafe { avx512($($arg),*) };
            }
            if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
                // SAFETY: as above.
                return unsafe { avx2($($arg),*) };
            }
        }
        $body($($arg),*)
    }};
}
pub(super) use dispatch;

/// One online-softmax step over a column-major score tile: `s[j·ld + i]` is row `i`'s score of
/// key `j`, for `s.len() / ld` keys and `ld` rows (a multiple of [`LANES`]). Each row's running
/// `max` and `sum` take in the tile, `s` becomes `exp(s − new max)`, and `corr[i]` receives
/// `exp(old max − new max)` (0 where the old max was −∞): the factor for the row's earlier output.
pub fn softmax_step(s: &mut [f32], ld: usize, max: &mut [f32], sum: &mut [f32], corr: &mut [f32]) {
    assert!(
        ld.is_multiple_of(LANES) && s.len().is_multiple_of(ld) && [max.len(), sum.len(), corr.len()] == [ld; 3],
        "softmax_step: {ld} rows"
    );
    dispatch!(softmax_step_body(s: &mut [f32], ld: usize, max: &mut [f32], sum: &mut [f32], corr: &mut [f32]) -> ())
}

/// The softmax gradient on column-major tiles laid out as in [`softmax_step`]: from the scores
/// `p` and `dP = dO·Vᵀ` in `ds`, `p` becomes `P = exp(s − lse[i])` and `ds` becomes
/// `dS = P ∘ (dP − delta[i])`, for rows `i < lse.len()` (the padding rows get values that mean
/// nothing).
pub fn softmax_grad(p: &mut [f32], ds: &mut [f32], ld: usize, lse: &[f32], delta: &[f32]) {
    assert!(
        ld.is_multiple_of(LANES) && p.len().is_multiple_of(ld) && ds.len() == p.len() && lse.len() <= ld && delta.len() == lse.len(),
        "softmax_grad: {ld} rows"
    );
    dispatch!(softmax_grad_body(p: &mut [f32], ds: &mut [f32], ld: usize, lse: &[f32], delta: &[f32]) -> ())
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
        let worst = (0..200_001)
            .map(|i| -87.0 + 88.0 * i as f32 / 200_000.0)
            .map(|x| ((f64::from(exp1(x)) - f64::from(x).exp()) / f64::from(x).exp()).abs())
            .fold(0.0, f64::max);
        assert!(worst < 2.5e-7, "max relative error {worst}");
        assert_eq!([-87.5f32, -200.0, f32::NEG_INFINITY].map(exp1), [0.0; 3]);
        assert_eq!(exp1(0.0), 1.0);
    }

    /// The online step against the two-pass softmax in f64 over a 3-key then a 2-key tile of 20
    /// rows (two 16-row blocks, the second mostly padding).
    #[test]
    fn softmax_step_matches_a_two_pass_softmax() {
        let (ld, rows) = (32, 20);
        let score = |i: usize, j: usize| ((i * 7 + j * 13) % 11) as f32 - 5.0 + i as f32 / 4.0;
        let (mut max, mut sum, mut corr) = (vec![f32::NEG_INFINITY; ld], vec![0.0; ld], vec![0.0; ld]);
        let mut first: Vec<f32> = (0..3).flat_map(|j| (0..ld).map(move |i| score(i, j))).collect();
        softmax_step(&mut first, ld, &mut max, &mut sum, &mut corr);
        assert!(corr[..rows].iter().all(|&c| c == 0.0));
        let mut second: Vec<f32> = (3..5).flat_map(|j| (0..ld).map(move |i| score(i, j))).collect();
        softmax_step(&mut second, ld, &mut max, &mut sum, &mut corr);
        for i in 0..rows {
            let s: Vec<f64> = (0..5).map(|j| f64::from(score(i, j))).collect();
            let m = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let total: f64 = s.iter().map(|x| (x - m).exp()).sum();
            assert_eq!(f64::from(max[i]), m, "row {i}");
            assert!((f64::from(sum[i]) - total).abs() < 1e-6 * total, "row {i}: {} against {total}", sum[i]);
            let m1 = s[..3].iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            assert!((f64::from(corr[i]) - (m1 - m).exp()).abs() < 1e-6, "row {i}");
            assert!((f64::from(second[ld + i]) - (s[4] - m).exp()).abs() < 1e-6, "row {i}");
        }
    }

    #[test]
    fn the_vector_builds_compute_the_baseline_bits() {
        let xs: Vec<f32> = (0..1024).map(|i| ((i * 7919) % 1013) as f32 / 37.0 - 20.0).collect();
        let ld = 64;
        let state = || (vec![1.0f32; ld], vec![0.5f32; ld], vec![0.0f32; ld]);
        let ((mut m1, mut s1, mut c1), (mut m2, mut s2, mut c2)) = (state(), state());
        let (mut fast, mut base) = (xs.clone(), xs.clone());
        softmax_step(&mut fast, ld, &mut m1, &mut s1, &mut c1);
        softmax_step_body(&mut base, ld, &mut m2, &mut s2, &mut c2);
        assert_eq!((&fast, &m1, &s1, &c1), (&base, &m2, &s2, &c2));
        let (lse, delta) = (&ys(&xs)[..50], &xs[100..150]);
        let (mut fast, mut fast_ds, mut base, mut base_ds) = (xs.clone(), ys(&xs), xs.clone(), ys(&xs));
        softmax_grad(&mut fast, &mut fast_ds, ld, lse, delta);
        softmax_grad_body(&mut base, &mut base_ds, ld, lse, delta);
        assert_eq!((&fast, &fast_ds), (&base, &base_ds));
        assert_eq!(dot(&xs, &fast).to_bits(), dot_body(&xs, &base).to_bits());
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
