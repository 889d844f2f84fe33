//! Classical colour segmentation of one RGB8 frame into coloured shapes (no learned model).
//!
//! 1. Background per row (plain and vertical-gradient backgrounds): the mean of the row's first
//!    and last pixel where the two agree (within [`FOREGROUND`] / 2), else the per-channel median
//!    of the row. The domain keeps objects off the frame's edge columns, but two objects side by
//!    side may cover more than half a row; a video from elsewhere may have an object at an edge.
//! 2. Foreground: pixels farther than [`FOREGROUND`] (RGB L2) from their row's background,
//!    grouped into 4-connected components; components below [`MIN_AREA`] are noise.
//! 3. Colour: the palette colour nearest to the component's core (its pixels farthest from the
//!    background), so anti-aliased rims never form objects of their own.
//! 4. Coverage α of each pixel along background → colour; area = Σα and the α-weighted centre.
//! 5. Shape: the ideal circle, square and upright triangle of the same area and centre are laid
//!    over the α map; the one with the highest soft IoU (Σ min / Σ max) wins. Blur, chroma
//!    bleeding and block artefacts of a codec move a few edge pixels, which barely changes IoU;
//!    a blob that fits no shape (IoU below [`MIN_FIT`]) is a codec artefact, not an object.

use crate::vocab::{COLOURS, Colour, Shape};
use serde::Serialize;

/// RGB distance from the background above which a pixel is foreground.
pub const FOREGROUND: f64 = 60.0;
/// Smallest object area at 64 px frames (scaled with the frame area); the domain's smallest
/// shape, a triangle of half-size 9 (`scene::RADIUS`), covers 162 px.
pub const MIN_AREA: f64 = 30.0;
/// Smallest soft IoU with an ideal shape for a blob to count as an object.
pub const MIN_FIT: f64 = 0.5;

/// One detected object.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Detection {
    /// The palette colour nearest to the object's core.
    pub colour: Colour,
    /// The ideal shape with the highest soft IoU.
    pub shape: Shape,
    /// Coverage-weighted centre, pixels.
    pub centroid: (f64, f64),
    /// Coverage-weighted area, pixels.
    pub area: f64,
    /// Soft IoU of the α map with the chosen ideal shape (1: exact).
    pub fit: f64,
}

fn dist(a: [f64; 3], b: [f64; 3]) -> f64 {
    ((a[0] - b[0]).powi(2) + (a[1] - b[1]).powi(2) + (a[2] - b[2]).powi(2)).sqrt()
}

fn row_backgrounds(rgb: &[u8], width: usize, height: usize) -> Vec<[f64; 3]> {
    let px = |y: usize, x: usize| [0, 1, 2].map(|c| f64::from(rgb[3 * (y * width + x) + c]));
    (0..height)
        .map(|y| {
            let (left, right) = (px(y, 0), px(y, width - 1));
            if dist(left, right) < FOREGROUND / 2.0 {
                return [0, 1, 2].map(|c| (left[c] + right[c]) / 2.0);
            }
            [0, 1, 2].map(|c| {
                let mut v: Vec<u8> = (0..width).map(|x| rgb[3 * (y * width + x) + c]).collect();
                v.sort_unstable();
                f64::from(v[width / 2])
            })
        })
        .collect()
}

fn components(mask: &[bool], width: usize, height: usize) -> Vec<Vec<usize>> {
    let mut seen = vec![false; mask.len()];
    let mut out = Vec::new();
    for start in 0..mask.len() {
        if !mask[start] || seen[start] {
            continue;
        }
        let mut stack = vec![start];
        seen[start] = true;
        let mut comp = Vec::new();
        while let Some(p) = stack.pop() {
            comp.push(p);
            let (x, y) = (p % width, p / width);
            let mut visit = |q: usize| {
                if mask[q] && !seen[q] {
                    seen[q] = true;
                    stack.push(q);
                }
            };
            if x > 0 {
                visit(p - 1);
            }
            if x + 1 < width {
                visit(p + 1);
            }
            if y > 0 {
                visit(p - width);
            }
            if y + 1 < height {
                visit(p + width);
            }
        }
        out.push(comp);
    }
    out
}

/// Objects in a `width × height` RGB8 frame, largest first.
pub fn detect(rgb: &[u8], width: usize, height: usize) -> Vec<Detection> {
    let px = |i: usize| [0, 1, 2].map(|c| f64::from(rgb[3 * i + c]));
    let bg = row_backgrounds(rgb, width, height);
    let mask: Vec<bool> = (0..width * height).map(|i| dist(px(i), bg[i / width]) > FOREGROUND).collect();
    let min_area = MIN_AREA * (width.min(height) as f64 / 64.0).powi(2);
    let mut found: Vec<Detection> = components(&mask, width, height)
        .into_iter()
        .filter(|c| c.len() as f64 >= min_area)
        .filter_map(|comp| {
            let mut by_dist: Vec<(f64, usize)> = comp.iter().map(|&i| (dist(px(i), bg[i / width]), i)).collect();
            by_dist.sort_by(|a, b| b.0.total_cmp(&a.0));
            let core = &by_dist[..by_dist.len().div_ceil(2)];
            let mean = [0, 1, 2].map(|c| core.iter().map(|&(_, i)| px(i)[c]).sum::<f64>() / core.len() as f64);
            let colour =
                COLOURS.iter().copied().min_by(|a, b| dist(mean, a.rgb().map(f64::from)).total_cmp(&dist(mean, b.rgb().map(f64::from))))?;
            Some(measure(&comp, colour, mean, &px, &bg, width))
        })
        .filter(|d| d.area >= min_area && d.fit >= MIN_FIT)
        .collect();
    found.sort_by(|a, b| b.area.total_cmp(&a.area));
    found
}

/// The ideal shape of `area` pixels centred (area-weighted) at `c`: (shape, half-size, box centre).
fn ideal(shape: Shape, area: f64, c: (f64, f64)) -> (f64, (f64, f64)) {
    match shape {
        Shape::Circle => ((area / std::f64::consts::PI).sqrt(), c),
        // The square of half-size r is drawn 0.9·r wide each way (render::inside).
        Shape::Square => (area.sqrt() / 1.8, c),
        // Upright triangle of half-size r has area 2r² and its centroid r/3 below its box centre.
        Shape::Triangle => {
            let r = (area / 2.0).sqrt();
            (r, (c.0, c.1 - r / 3.0))
        }
    }
}

/// Soft IoU of the α map `(x, y, α)` with `shape` (2×2 supersampled coverage).
fn iou(alpha: &[(usize, usize, f64)], shape: Shape, area: f64, c: (f64, f64)) -> f64 {
    let (r, centre) = ideal(shape, area, c);
    let (mut inter, mut union) = (0.0, 0.0);
    for &(x, y, a) in alpha {
        let hits = (0..4).filter(|s| {
            let (sx, sy) = (x as f64 + 0.25 + 0.5 * (s % 2) as f64, y as f64 + 0.25 + 0.5 * (s / 2) as f64);
            crate::render::inside(shape, sx, sy, centre.0, centre.1, r)
        });
        let m = hits.count() as f64 / 4.0;
        inter += a.min(m);
        union += a.max(m);
    }
    inter / union.max(1e-9)
}

/// Coverage-weighted area and centre of a component drawn in `mean` over the background, and
/// the best-fitting shape.
fn measure(comp: &[usize], colour: Colour, mean: [f64; 3], px: &dyn Fn(usize) -> [f64; 3], bg: &[[f64; 3]], width: usize) -> Detection {
    let xs = || comp.iter().map(|i| i % width);
    let ys = || comp.iter().map(|i| i / width);
    let height = bg.len();
    // Grow by two pixels to take the anti-aliased rim below the foreground threshold.
    let (x0, x1) = (xs().min().unwrap_or(0).saturating_sub(2), (xs().max().unwrap_or(0) + 2).min(width - 1));
    let (y0, y1) = (ys().min().unwrap_or(0).saturating_sub(2), (ys().max().unwrap_or(0) + 2).min(height - 1));
    let mut alpha = Vec::with_capacity((x1 - x0 + 1) * (y1 - y0 + 1));
    for (y, &b) in bg.iter().enumerate().take(y1 + 1).skip(y0) {
        let d = [mean[0] - b[0], mean[1] - b[1], mean[2] - b[2]];
        let norm = d.iter().map(|v| v * v).sum::<f64>().max(1e-9);
        for x in x0..=x1 {
            let p = px(y * width + x);
            let a = (((p[0] - b[0]) * d[0] + (p[1] - b[1]) * d[1] + (p[2] - b[2]) * d[2]) / norm).clamp(0.0, 1.0);
            alpha.push((x, y, if a < 0.1 { 0.0 } else { a }));
        }
    }
    let area: f64 = alpha.iter().map(|p| p.2).sum();
    let safe = area.max(1e-9);
    let centroid = (
        alpha.iter().map(|p| p.2 * (p.0 as f64 + 0.5)).sum::<f64>() / safe,
        alpha.iter().map(|p| p.2 * (p.1 as f64 + 0.5)).sum::<f64>() / safe,
    );
    let (shape, fit) = crate::vocab::SHAPES
        .iter()
        .map(|&s| (s, iou(&alpha, s, area, centroid)))
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .unwrap_or((Shape::Circle, 0.0));
    Detection { colour, shape, centroid, area, fit }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::render_frame;
    use crate::scene::{Scene, SceneConfig};

    /// The detector recovers the generator's ground truth on every frame of many scenes.
    #[test]
    fn detector_matches_generator_ground_truth() {
        let config = SceneConfig { two_objects: 0.0, gradient: 0.5, ..Default::default() };
        for seed in 0..120 {
            let scene = Scene::sample(seed, &config);
            for step in [0usize, 17, 40, 80] {
                let t = step as f64 / 16.0;
                let d = detect(&render_frame(&scene, t), 64, 64);
                let o = &scene.objects[0];
                assert_eq!(d.len(), 1, "seed {seed} t {t}: {d:?} for {}", scene.caption());
                assert_eq!((d[0].colour, d[0].shape), (o.prompt.colour, o.prompt.shape), "seed {seed} t {t} fit {}", d[0].fit);
                assert!(d[0].fit > 0.9, "seed {seed} t {t} fit {}", d[0].fit);
                let (cx, cy) = scene.position(0, t);
                let dy = if o.prompt.shape == Shape::Triangle { o.radius / 3.0 } else { 0.0 };
                assert!(
                    (d[0].centroid.0 - cx).abs() < 0.3 && (d[0].centroid.1 - cy - dy).abs() < 0.3,
                    "seed {seed}: {:?} vs {cx},{cy}",
                    d[0].centroid
                );
            }
        }
    }

    #[test]
    fn two_separate_objects_are_both_found() {
        let config = SceneConfig { two_objects: 1.0, gradient: 0.0, ..Default::default() };
        let mut checked = 0;
        for seed in 0..100 {
            let scene = Scene::sample(seed, &config);
            let (a, b) = (scene.position(0, 0.0), scene.position(1, 0.0));
            // Every shape of half-size r lies within √2·r of its centre (a triangle's base corners).
            let reach = |i: usize| std::f64::consts::SQRT_2 * scene.objects[i].radius;
            let gap = ((a.0 - b.0).powi(2) + (a.1 - b.1).powi(2)).sqrt() - reach(0) - reach(1);
            if gap < 3.0 {
                continue;
            }
            checked += 1;
            let mut want: Vec<(Colour, Shape)> = scene.objects.iter().map(|o| (o.prompt.colour, o.prompt.shape)).collect();
            let mut got: Vec<(Colour, Shape)> = detect(&render_frame(&scene, 0.0), 64, 64).iter().map(|d| (d.colour, d.shape)).collect();
            want.sort_by_key(|x| format!("{x:?}"));
            got.sort_by_key(|x| format!("{x:?}"));
            assert_eq!(got, want, "seed {seed}");
        }
        assert!(checked > 20, "only {checked} of 100 scenes have separate objects");
    }
}
