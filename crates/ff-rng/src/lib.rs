//! The workspace's one random-number generator: SplitMix64 (Steele, Lea and Flood, "Fast
//! splittable pseudorandom number generators", OOPSLA 2014), used as a counter-based generator.
//!
//! SplitMix64's state is a counter advanced by a fixed odd constant (the golden gamma), and each
//! output is a bijective mix of the counter, so value `i` of a stream is a pure function of its
//! seed and `i`: [`mix`] is that function and [`Rng`] walks it. Everything random in the
//! workspace is drawn from it on the host, so every backend, thread count and data-parallel
//! layout sees the same numbers, and a checkpoint saves a stream exactly (one `u64`):
//!
//! * generation noise (`ff_sched::exec::noise`): [`normal_at`], one key per (seed, stream, frame,
//!   noise level), so a frame's noise does not depend on which worker draws it or when;
//! * training (`ff_train::TrainRng`): an [`Rng`] per run, [`Rng::fork`]ed per worker and clip;
//! * the small world's scenes (`ff_world::scene`) and the loader fuzz test.
//!
//! Why by hand: SplitMix64 is twelve lines, and the workspace needs its counter form (the mixer
//! as a hash of a key) and a serialisable state that `rand`'s generators do not expose as such.
//!
//! ```
//! let mut a = ff_rng::Rng::new(7);
//! let first = a.next_u64();
//! assert_eq!(first, ff_rng::mix(7), "output i of seed s is mix(s + i·gamma)");
//! assert_eq!(ff_rng::Rng::new(7).fork(3).next_u64(), ff_rng::Rng::new(7).fork(3).next_u64());
//! ```

#![warn(missing_docs)]

use serde::{Deserialize, Serialize};

/// SplitMix64's increment (2⁶⁴ / φ, odd).
pub const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// The SplitMix64 output of counter `z`: `z + γ` through the 64-bit finaliser. A bijection of
/// `u64`, so chaining it over the parts of a key (`mix(mix(a) ^ b)`) gives independent streams.
pub fn mix(z: u64) -> u64 {
    let mut z = z.wrapping_add(GAMMA);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Standard normal number `index` of the stream `key` (counter-based: Box–Muller over
/// `mix(key ^ mix(2·index))` and `mix(key ^ mix(2·index + 1))`, uniforms in (0, 1]).
pub fn normal_at(key: u64, index: u64) -> f64 {
    let unit = |x: u64| ((x >> 11) + 1) as f64 / (1u64 << 53) as f64;
    let u1 = unit(mix(key ^ mix(2 * index)));
    let u2 = unit(mix(key ^ mix(2 * index + 1)));
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// A SplitMix64 stream: its whole state is one counter, saved and restored exactly.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rng {
    state: u64,
}

impl Rng {
    /// The stream of `seed`.
    pub fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    /// An independent stream derived from this one's state and `stream` (e.g. a worker or clip
    /// index), leaving this one untouched.
    pub fn fork(&self, stream: u64) -> Self {
        Self { state: mix(self.state ^ stream.wrapping_mul(0xA076_1D64_78BD_642F)) }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let out = mix(self.state);
        self.state = self.state.wrapping_add(GAMMA);
        out
    }

    /// Uniform in [0, 1).
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in [lo, hi).
    pub fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.uniform()
    }

    /// Uniform integer in `0..n` (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// One of `items` (not empty), uniformly.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    /// Standard normal (Box–Muller).
    pub fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.uniform();
        let u2 = self.uniform();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SplitMix64's first outputs for seed 1234567, as the reference algorithm (Vigna's
    /// `splitmix64.c`) gives them (recomputed by an independent Python transcription of it).
    #[test]
    fn the_stream_is_splitmix64() {
        let mut r = Rng::new(1_234_567);
        let want = [6_457_827_717_110_365_317u64, 3_203_168_211_198_807_973, 9_817_491_932_198_370_423];
        assert_eq!([r.next_u64(), r.next_u64(), r.next_u64()], want);
    }

    #[test]
    fn normals_look_standard_and_forks_are_reproducible() {
        let mut r = Rng::new(3);
        let xs: Vec<f64> = (0..20_000).map(|_| r.normal()).collect();
        let mean = xs.iter().sum::<f64>() / xs.len() as f64;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / xs.len() as f64;
        assert!(mean.abs() < 0.03 && (var - 1.0).abs() < 0.05, "mean {mean} var {var}");
        let keyed: Vec<f64> = (0..20_000).map(|i| normal_at(9, i)).collect();
        let mean = keyed.iter().sum::<f64>() / keyed.len() as f64;
        assert!(mean.abs() < 0.03, "mean {mean}");
        let base = Rng::new(9);
        assert_eq!(base.fork(1).next_u64(), base.fork(1).next_u64());
        assert_ne!(base.fork(1).next_u64(), base.fork(2).next_u64());
        assert!((0..1000).all(|_| r.below(7) < 7) && (0..1000).map(|_| r.range(2.0, 3.0)).all(|x| (2.0..3.0).contains(&x)));
    }

    #[test]
    fn the_state_round_trips_through_serde_as_checkpoints_store_it() {
        let mut r = Rng::new(5);
        r.next_u64();
        let json = serde_json::to_string(&r).unwrap();
        assert_eq!(json, format!("{{\"state\":{}}}", 5u64.wrapping_add(GAMMA)));
        let mut back: Rng = serde_json::from_str(&json).unwrap();
        assert_eq!(back.next_u64(), r.next_u64());
    }
}
