//! Motion verbs from a centroid track.
//!
//! A reversal is a run of at least [`REVERSAL`] px one way along an axis followed by at least as
//! much back: any reversal on either axis is "bounces". Otherwise the net displacement between
//! the means of the first and last tenth of the track names the direction when it exceeds
//! [`MOVED`] px; less is no motion. Distances scale with the frame size (64 px reference).

use crate::vocab::Motion;

pub const REVERSAL: f64 = 3.0;
pub const MOVED: f64 = 3.0;

/// Distances between consecutive found centroids (a gap of missing frames is skipped).
pub fn jumps(c: &[Option<(f64, f64)>]) -> Vec<f64> {
    c.windows(2).filter_map(|w| Some((w[0]?.0 - w[1]?.0).hypot(w[0]?.1 - w[1]?.1))).collect()
}

fn reverses(values: &[f64], threshold: f64) -> bool {
    // Track the running extremes of the current leg; a leg ends when the value comes back by
    // `threshold` from its extreme.
    let Some(&first) = values.first() else { return false };
    let (mut lo, mut hi) = (first, first);
    let mut direction = 0i8;
    for &v in values {
        lo = lo.min(v);
        hi = hi.max(v);
        match direction {
            0 if hi - first >= threshold => direction = 1,
            0 if first - lo >= threshold => direction = -1,
            1 if hi - v >= threshold => return true,
            -1 if v - lo >= threshold => return true,
            _ => {}
        }
    }
    false
}

/// The motion verb of a track (`None`: no measurable motion or too few points).
pub fn verb(c: &[Option<(f64, f64)>], scale: f64) -> Option<Motion> {
    let pts: Vec<(f64, f64)> = c.iter().flatten().copied().collect();
    if pts.len() < 4 {
        return None;
    }
    let xs: Vec<f64> = pts.iter().map(|p| p.0).collect();
    let ys: Vec<f64> = pts.iter().map(|p| p.1).collect();
    if reverses(&xs, REVERSAL * scale) || reverses(&ys, REVERSAL * scale) {
        return Some(Motion::Bounces);
    }
    let k = (pts.len() / 10).max(1);
    let mean =
        |s: &[(f64, f64)]| (s.iter().map(|p| p.0).sum::<f64>() / s.len() as f64, s.iter().map(|p| p.1).sum::<f64>() / s.len() as f64);
    let (a, b) = (mean(&pts[..k]), mean(&pts[pts.len() - k..]));
    let (dx, dy) = (b.0 - a.0, b.1 - a.1);
    if dx.abs().max(dy.abs()) < MOVED * scale {
        return None;
    }
    Some(if dx.abs() >= dy.abs() {
        if dx < 0.0 { Motion::Left } else { Motion::Right }
    } else if dy < 0.0 {
        Motion::Up
    } else {
        Motion::Down
    })
}
