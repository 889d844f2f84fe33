//! Minimal SVG line plots for the evaluation's per-frame and per-window metrics.

/// One named series of (x, y) points.
pub struct Series<'a> {
    /// The legend's label.
    pub name: &'a str,
    /// The points in drawing order, joined by a polyline.
    pub points: Vec<(f64, f64)>,
}

const COLOURS: [&str; 4] = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e"];

fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// A `title`d plot with labelled axes, ticks, and a legend.
pub fn line_plot(title: &str, x_label: &str, y_label: &str, series: &[Series]) -> String {
    let (w, h, left, right, top, bottom) = (720.0, 320.0, 60.0, 150.0, 30.0, 45.0);
    let all = || series.iter().flat_map(|s| s.points.iter());
    let (x0, x1) = (all().map(|p| p.0).fold(f64::INFINITY, f64::min), all().map(|p| p.0).fold(f64::NEG_INFINITY, f64::max));
    let (y0, y1) = (all().map(|p| p.1).fold(0.0, f64::min), all().map(|p| p.1).fold(f64::NEG_INFINITY, f64::max));
    let (x0, x1) = if x0.is_finite() && x1 > x0 { (x0, x1) } else { (0.0, 1.0) };
    let y1 = if y1.is_finite() && y1 > y0 { y1 } else { y0 + 1.0 };
    let px = |x: f64| left + (x - x0) / (x1 - x0) * (w - left - right);
    let py = |y: f64| h - bottom - (y - y0) / (y1 - y0) * (h - top - bottom);
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"11\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<text x=\"{}\" y=\"18\" font-size=\"13\">{}</text>\n",
        left,
        escape(title)
    );
    out += &format!("<line x1=\"{left}\" y1=\"{0}\" x2=\"{1}\" y2=\"{0}\" stroke=\"black\"/>\n", h - bottom, w - right);
    out += &format!("<line x1=\"{left}\" y1=\"{top}\" x2=\"{left}\" y2=\"{}\" stroke=\"black\"/>\n", h - bottom);
    for i in 0..=5 {
        let (xv, yv) = (x0 + (x1 - x0) * i as f64 / 5.0, y0 + (y1 - y0) * i as f64 / 5.0);
        out += &format!("<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{xv:.3}</text>\n", px(xv), h - bottom + 15.0);
        out += &format!("<text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{yv:.3}</text>\n", left - 4.0, py(yv) + 4.0);
    }
    out += &format!("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", (left + w - right) / 2.0, h - 8.0, escape(x_label));
    out += &format!(
        "<text x=\"14\" y=\"{}\" transform=\"rotate(-90 14 {0})\" text-anchor=\"middle\">{}</text>\n",
        (top + h - bottom) / 2.0,
        escape(y_label)
    );
    for (i, s) in series.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let pts: Vec<String> = s.points.iter().map(|&(x, y)| format!("{:.1},{:.1}", px(x), py(y))).collect();
        out += &format!("<polyline fill=\"none\" stroke=\"{colour}\" stroke-width=\"1.2\" points=\"{}\"/>\n", pts.join(" "));
        let ly = top + 14.0 * i as f64;
        out += &format!("<rect x=\"{}\" y=\"{}\" width=\"10\" height=\"10\" fill=\"{colour}\"/>\n", w - right + 10.0, ly);
        out += &format!("<text x=\"{}\" y=\"{}\">{}</text>\n", w - right + 24.0, ly + 9.0, escape(s.name));
    }
    out + "</svg>\n"
}
