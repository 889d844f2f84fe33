//! RGB frames of a [`Scene`]: `frames` frames at [`FPS`], each `height × width` RGB8 row-major.
//! Shape edges are anti-aliased (4×4 supersampled coverage), so codecs see smooth edges.

use crate::scene::Scene;
use crate::vocab::Shape;

/// Frames per second of every clip of the domain (the Wan rate).
pub const FPS: usize = 16;

/// RGB frames for `seconds` of video: `16·s + 1`, i.e. `1 + 4(L − 1)` for `L = 4s + 1` latents.
pub fn frames_for_seconds(seconds: usize) -> usize {
    FPS * seconds + 1
}

/// A clip: equal-size RGB8 frames.
#[derive(Clone, Debug, PartialEq)]
pub struct Clip {
    /// Frame width, pixels.
    pub width: usize,
    /// Frame height, pixels.
    pub height: usize,
    /// The frames in time order, each `height × width × 3` bytes (RGB8, row-major).
    pub frames: Vec<Vec<u8>>,
}

fn background(scene: &Scene, y: usize) -> [f64; 3] {
    let base = scene.prompt.background.rgb().map(f64::from);
    if !scene.prompt.gradient {
        return base;
    }
    // Vertical gradient from the background colour at the top row to `gradient_delta` at the bottom.
    let t = y as f64 / (scene.height.max(2) - 1) as f64;
    let delta = scene.prompt.background.gradient_delta();
    base.map(|c| c + delta * t)
}

/// Whether point (x, y) lies inside a shape centred at (cx, cy) of half-size r.
pub(crate) fn inside(shape: Shape, x: f64, y: f64, cx: f64, cy: f64, r: f64) -> bool {
    let (dx, dy) = (x - cx, y - cy);
    match shape {
        Shape::Circle => dx * dx + dy * dy <= r * r,
        Shape::Square => dx.abs() <= 0.9 * r && dy.abs() <= 0.9 * r,
        // Upright isosceles triangle: apex (0, −r), base from (−r, r) to (r, r).
        Shape::Triangle => dy <= r && dy >= -r && dx.abs() <= (dy + r) / 2.0,
    }
}

/// Frame at time `t` seconds.
pub fn render_frame(scene: &Scene, t: f64) -> Vec<u8> {
    let (w, h) = (scene.width, scene.height);
    let mut img: Vec<[f64; 3]> = (0..h).flat_map(|y| std::iter::repeat_n(background(scene, y), w)).collect();
    for (i, o) in scene.objects.iter().enumerate() {
        let (cx, cy) = scene.position(i, t);
        let colour = o.prompt.colour.rgb().map(f64::from);
        let x0 = (cx - o.radius - 1.0).floor().max(0.0) as usize;
        let y0 = (cy - o.radius - 1.0).floor().max(0.0) as usize;
        let x1 = ((cx + o.radius + 1.0).ceil() as usize).min(w);
        let y1 = ((cy + o.radius + 1.0).ceil() as usize).min(h);
        for y in y0..y1 {
            for x in x0..x1 {
                let hits = (0..16)
                    .filter(|s| {
                        let (sx, sy) = (x as f64 + (s % 4) as f64 / 4.0 + 0.125, y as f64 + (s / 4) as f64 / 4.0 + 0.125);
                        inside(o.prompt.shape, sx, sy, cx, cy, o.radius)
                    })
                    .count();
                let c = hits as f64 / 16.0;
                let p = &mut img[y * w + x];
                *p = [0, 1, 2].map(|k| p[k] * (1.0 - c) + colour[k] * c);
            }
        }
    }
    img.iter().flat_map(|p| p.map(|c| c.round().clamp(0.0, 255.0) as u8)).collect()
}

/// `frames` consecutive frames from t = 0.
pub fn render(scene: &Scene, frames: usize) -> Clip {
    render_from(scene, 0.0, frames)
}

/// `frames` consecutive frames from t = `start` seconds: a window of the scene's motion, whose
/// first frame shows the objects where they are at `start` (mid-way, or resting at a wall).
pub fn render_from(scene: &Scene, start: f64, frames: usize) -> Clip {
    let frames = (0..frames).map(|f| render_frame(scene, start + f as f64 / FPS as f64)).collect();
    Clip { width: scene.width, height: scene.height, frames }
}
