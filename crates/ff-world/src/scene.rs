//! A seeded scene: one or two coloured shapes with simple physics on a plain or gradient
//! background, and the caption generated from the same parameters.
//!
//! Motion is closed-form in time, so any frame of any length of clip is computed on its own:
//! "moves left/right/up/down" travels at [`LINEAR_SPEED`] px/s from near one wall and rests
//! against the opposite wall; "bounces" moves diagonally and reflects off every wall. Objects
//! never leave the frame, so a 65 s clip keeps every object in view.

use crate::vocab::{BACKGROUNDS, COLOURS, MOTIONS, Motion, ObjectPrompt, Prompt, SHAPES};
use ff_rng::Rng;
use serde::Serialize;

/// Speed of the straight motions at 64 px frames (scaled with the frame size), px/s.
pub const LINEAR_SPEED: f64 = 4.0;
/// Per-axis speed range of bouncing objects at 64 px frames, px/s.
pub const BOUNCE_SPEED: (f64, f64) = (12.0, 18.0);

/// Half-size range of objects at 64 px frames (scaled with the frame size), px. A square of
/// half-size r is 1.8·r wide, so the smallest square spans two latent pixels of a codec with 8×
/// spatial compression. At half-sizes 6–9 the small world's tiny codec (`models/world/vae`)
/// decoded many squares and triangles of 11–16 px as round blobs: the identity that `eval` reads
/// survived the codec in 60 % of 72 held-out single-object clips, against 93 % at 9–12
/// (`vae eval --two-objects 0`, docs/RESULTS.md, "Codec").
pub const RADIUS: (f64, f64) = (9.0, 12.0);

/// Frame size and sampling ranges.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SceneConfig {
    /// Frame width, pixels (default 64).
    pub width: usize,
    /// Frame height, pixels (default 64).
    pub height: usize,
    /// Probability of a second object.
    pub two_objects: f64,
    /// Probability of a gradient background.
    pub gradient: f64,
}

impl Default for SceneConfig {
    fn default() -> Self {
        Self { width: 64, height: 64, two_objects: 0.0, gradient: 0.25 }
    }
}

/// One object: what the caption says plus where it starts and how fast it goes.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Object {
    /// Colour, shape and motion, as the caption names them.
    pub prompt: ObjectPrompt,
    /// Half-size in pixels (circle radius).
    pub radius: f64,
    /// Centre at t = 0, pixels.
    pub start: (f64, f64),
    /// Velocity, px/s.
    pub velocity: (f64, f64),
}

/// A scene of the domain.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Scene {
    /// What the caption says ([`Scene::caption`]).
    pub prompt: Prompt,
    /// The objects, one per `prompt.objects` entry, in the same order.
    pub objects: Vec<Object>,
    /// Frame width, pixels.
    pub width: usize,
    /// Frame height, pixels.
    pub height: usize,
}

/// The start time of a window drawn from `seed`: uniform over `[0, within]` seconds in whole
/// frames at [`crate::FPS`] (0 when `within` is 0), from a stream other than the scene's own.
pub fn window_start(seed: u64, within: f64) -> f64 {
    if within <= 0.0 {
        return 0.0;
    }
    let fps = crate::FPS as f64;
    (Rng::new(seed ^ 0x5749_4E44_4F57_0001).range(0.0, within) * fps).round() / fps
}

/// Position along one axis: `u0 + v·t` reflected between `lo` and `hi` (bounce) or clamped.
fn travel(u0: f64, v: f64, t: f64, lo: f64, hi: f64, bounce: bool) -> f64 {
    let u = u0 + v * t;
    if !bounce {
        return u.clamp(lo, hi);
    }
    let span = hi - lo;
    if span <= 0.0 {
        return lo;
    }
    let m = (u - lo).rem_euclid(2.0 * span);
    lo + if m > span { 2.0 * span - m } else { m }
}

impl Scene {
    /// A random scene (caption included) from `seed`.
    pub fn sample(seed: u64, config: &SceneConfig) -> Self {
        let mut rng = Rng::new(seed);
        let background = *rng.pick(&BACKGROUNDS);
        let gradient = rng.uniform() < config.gradient;
        let count = if rng.uniform() < config.two_objects { 2 } else { 1 };
        let mut objects: Vec<ObjectPrompt> = Vec::new();
        while objects.len() < count {
            let colour = *rng.pick(&COLOURS);
            if background.admits(colour, gradient) && objects.iter().all(|o| o.colour != colour) {
                objects.push(ObjectPrompt { colour, shape: *rng.pick(&SHAPES), motion: *rng.pick(&MOTIONS) });
            }
        }
        Self::place(Prompt { objects, background, gradient }, &mut rng, config.width, config.height)
    }

    /// A scene that shows `prompt`, with positions and speeds drawn from `seed`.
    pub fn from_prompt(prompt: Prompt, seed: u64, width: usize, height: usize) -> Self {
        Self::place(prompt, &mut Rng::new(seed), width, height)
    }

    fn place(prompt: Prompt, rng: &mut Rng, width: usize, height: usize) -> Self {
        let scale = width.min(height) as f64 / 64.0;
        let objects = prompt
            .objects
            .iter()
            .map(|&p| {
                let radius = rng.range(RADIUS.0, RADIUS.1) * scale;
                let (w, h) = (width as f64, height as f64);
                let margin = radius + 2.0 * scale;
                let near = |size: f64, rng: &mut Rng| rng.range(margin, margin + 0.15 * (size - 2.0 * margin));
                let far = |size: f64, rng: &mut Rng| size - near(size, rng);
                let any = |size: f64, rng: &mut Rng| rng.range(margin, size - margin);
                let s = LINEAR_SPEED * scale;
                let (start, velocity) = match p.motion {
                    Motion::Left => ((far(w, rng), any(h, rng)), (-s, 0.0)),
                    Motion::Right => ((near(w, rng), any(h, rng)), (s, 0.0)),
                    Motion::Up => ((any(w, rng), far(h, rng)), (0.0, -s)),
                    Motion::Down => ((any(w, rng), near(h, rng)), (0.0, s)),
                    Motion::Bounces => {
                        let mut speed = || rng.range(BOUNCE_SPEED.0, BOUNCE_SPEED.1) * scale * if rng.uniform() < 0.5 { -1.0 } else { 1.0 };
                        let v = (speed(), speed());
                        ((any(w, rng), any(h, rng)), v)
                    }
                };
                Object { prompt: p, radius, start, velocity }
            })
            .collect();
        Self { prompt, objects, width, height }
    }

    /// The scene's canonical caption ([`Prompt::caption`]); [`Prompt::parse`] reads it back.
    pub fn caption(&self) -> String {
        self.prompt.caption()
    }

    /// Centre of object `i` at time `t` seconds.
    pub fn position(&self, i: usize, t: f64) -> (f64, f64) {
        let o = &self.objects[i];
        let bounce = o.prompt.motion == Motion::Bounces;
        let axis = |u0: f64, v: f64, size: usize| travel(u0, v, t, o.radius + 1.0, size as f64 - o.radius - 1.0, bounce);
        (axis(o.start.0, o.velocity.0, self.width), axis(o.start.1, o.velocity.1, self.height))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_stay_in_frame_for_65_seconds_and_move_as_captioned() {
        for seed in 0..200 {
            let scene = Scene::sample(seed, &SceneConfig { two_objects: 0.5, ..Default::default() });
            assert_eq!(crate::vocab::Prompt::parse(&scene.caption()).unwrap(), scene.prompt);
            for (i, o) in scene.objects.iter().enumerate() {
                for step in 0..=65 * 16 {
                    let (x, y) = scene.position(i, step as f64 / 16.0);
                    assert!(x - o.radius >= 0.0 && x + o.radius <= 64.0 && y - o.radius >= 0.0 && y + o.radius <= 64.0, "seed {seed}");
                }
                let (a, b) = (scene.position(i, 0.0), scene.position(i, 5.0));
                match o.prompt.motion {
                    Motion::Left => assert!(b.0 < a.0 - 10.0 && b.1 == a.1),
                    Motion::Right => assert!(b.0 > a.0 + 10.0 && b.1 == a.1),
                    Motion::Up => assert!(b.1 < a.1 - 10.0 && b.0 == a.0),
                    Motion::Down => assert!(b.1 > a.1 + 10.0 && b.0 == a.0),
                    Motion::Bounces => {}
                }
            }
        }
    }

    #[test]
    fn window_starts_cover_their_range_in_whole_frames() {
        assert_eq!(window_start(3, 0.0), 0.0);
        let starts: Vec<f64> = (0..400).map(|seed| window_start(seed, 15.0)).collect();
        assert!(starts.iter().all(|&t| (0.0..=15.0).contains(&t) && (t * 16.0).fract() == 0.0));
        // Uniform: each third of the range holds about a third of the starts.
        for third in 0..3 {
            let n = starts.iter().filter(|&&t| (t / 5.0).floor() as usize == third).count();
            assert!((100..=170).contains(&n), "third {third}: {n}");
        }
        assert_eq!(window_start(7, 15.0), window_start(7, 15.0));
    }

    #[test]
    fn a_window_from_a_late_start_shows_a_linear_mover_at_rest() {
        let c = SceneConfig::default();
        let scene = (0..).map(|seed| Scene::sample(seed, &c)).find(|s| s.objects[0].prompt.motion == Motion::Down).unwrap();
        let late = crate::render::render_from(&scene, 15.0, 2);
        assert_eq!(late.frames[0], crate::render::render(&scene, 15 * 16 + 1).frames[15 * 16]);
        assert_eq!(late.frames[0], late.frames[1], "a mover rests against its wall after 15 s");
        assert!(scene.position(0, 15.0).1 > 40.0);
    }

    #[test]
    fn same_seed_same_scene() {
        let c = SceneConfig::default();
        assert_eq!(Scene::sample(5, &c), Scene::sample(5, &c));
        assert_ne!(Scene::sample(5, &c), Scene::sample(6, &c));
    }
}
