//! Small SVG line charts with logarithmic axes, for benchmark figures.

use std::fmt::Write;

/// One line of a chart.
pub struct Series {
    /// Legend.
    pub name: String,
    /// Points (x, y); non-positive values are skipped on log axes.
    pub points: Vec<(f64, f64)>,
}

const COLORS: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];

fn ticks(lo: f64, hi: f64) -> Vec<f64> {
    let (a, b) = (lo.log10().floor() as i32, hi.log10().ceil() as i32);
    (a..=b).map(|e| 10f64.powi(e)).collect()
}

fn label(v: f64) -> String {
    if v >= 1e6 {
        format!("{}M", v / 1e6)
    } else if v >= 1e3 {
        format!("{}k", v / 1e3)
    } else if v >= 1.0 {
        format!("{v}")
    } else {
        format!("{v:e}")
    }
}

/// A log-log chart of `series`.
pub fn chart(title: &str, xlabel: &str, ylabel: &str, series: &[Series]) -> String {
    let pts: Vec<(f64, f64)> = series
        .iter()
        .flat_map(|s| s.points.iter().copied())
        .filter(|&(x, y)| x > 0.0 && y > 0.0 && x.is_finite() && y.is_finite())
        .collect();
    let (w, h, l, r, t, b) = (760.0, 480.0, 80.0, 190.0, 40.0, 60.0);
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(svg, r#"<rect width="{w}" height="{h}" fill="white"/>"#);
    let _ = writeln!(
        svg,
        r#"<text x="{}" y="22" text-anchor="middle" font-size="15">{title}</text>"#,
        w / 2.0
    );
    if pts.is_empty() {
        svg.push_str("</svg>\n");
        return svg;
    }
    let fold = |f: fn(f64, f64) -> f64, init, sel: fn(&(f64, f64)) -> f64| {
        pts.iter().map(sel).fold(init, f)
    };
    let (x0, x1) = (
        fold(f64::min, f64::MAX, |p| p.0),
        fold(f64::max, 0.0, |p| p.0),
    );
    let (y0, y1) = (
        fold(f64::min, f64::MAX, |p| p.1),
        fold(f64::max, 0.0, |p| p.1),
    );
    let (lx0, lx1) = (
        x0.log10().floor(),
        x1.log10().ceil().max(x0.log10().floor() + 1.0),
    );
    let (ly0, ly1) = (
        y0.log10().floor(),
        y1.log10().ceil().max(y0.log10().floor() + 1.0),
    );
    let px = |x: f64| l + (x.log10() - lx0) / (lx1 - lx0) * (w - l - r);
    let py = |y: f64| h - b - (y.log10() - ly0) / (ly1 - ly0) * (h - t - b);
    for tx in ticks(10f64.powf(lx0), 10f64.powf(lx1)) {
        let x = px(tx);
        let _ = writeln!(
            svg,
            r##"<line x1="{x:.1}" y1="{t}" x2="{x:.1}" y2="{}" stroke="#ddd"/>"##,
            h - b
        );
        let _ = writeln!(
            svg,
            r#"<text x="{x:.1}" y="{}" text-anchor="middle">{}</text>"#,
            h - b + 16.0,
            label(tx)
        );
    }
    for ty in ticks(10f64.powf(ly0), 10f64.powf(ly1)) {
        let y = py(ty);
        let _ = writeln!(
            svg,
            r##"<line x1="{l}" y1="{y:.1}" x2="{}" y2="{y:.1}" stroke="#ddd"/>"##,
            w - r
        );
        let _ = writeln!(
            svg,
            r#"<text x="{}" y="{:.1}" text-anchor="end">{}</text>"#,
            l - 6.0,
            y + 4.0,
            label(ty)
        );
    }
    let _ = writeln!(
        svg,
        r#"<text x="{}" y="{}" text-anchor="middle">{xlabel}</text>"#,
        l + (w - l - r) / 2.0,
        h - 20.0
    );
    let _ = writeln!(
        svg,
        r#"<text x="20" y="{}" text-anchor="middle" transform="rotate(-90 20 {})">{ylabel}</text>"#,
        t + (h - t - b) / 2.0,
        t + (h - t - b) / 2.0
    );
    for (i, s) in series.iter().enumerate() {
        let c = COLORS[i % COLORS.len()];
        let line: Vec<String> = s
            .points
            .iter()
            .filter(|&&(x, y)| x > 0.0 && y > 0.0 && x.is_finite() && y.is_finite())
            .map(|&(x, y)| format!("{:.1},{:.1}", px(x), py(y)))
            .collect();
        let _ = writeln!(
            svg,
            r#"<polyline fill="none" stroke="{c}" stroke-width="2" points="{}"/>"#,
            line.join(" ")
        );
        let ly = t + 10.0 + 18.0 * i as f64;
        let _ = writeln!(
            svg,
            r#"<line x1="{}" y1="{ly}" x2="{}" y2="{ly}" stroke="{c}" stroke-width="3"/>"#,
            w - r + 10.0,
            w - r + 30.0
        );
        let _ = writeln!(
            svg,
            r#"<text x="{}" y="{}">{}</text>"#,
            w - r + 36.0,
            ly + 4.0,
            s.name
        );
    }
    svg.push_str("</svg>\n");
    svg
}
