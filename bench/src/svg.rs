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

/// Tick values for a log axis from `lo` to `hi`: the ends, and the powers of ten
/// between them (those too close to an end to be read apart left out).
fn ticks(lo: f64, hi: f64) -> Vec<f64> {
    let mut out = vec![lo];
    let (a, b) = (lo.log10().ceil() as i32, hi.log10().floor() as i32);
    let span = (hi.log10() - lo.log10()).max(f64::MIN_POSITIVE);
    for e in a..=b {
        let v = 10f64.powi(e);
        let apart = |end: f64| ((v.log10() - end.log10()) / span).abs() > 0.06;
        if apart(lo) && apart(hi) {
            out.push(v);
        }
    }
    if hi > lo {
        out.push(hi);
    }
    out
}

/// The ends of a log axis holding `lo..=hi`: the measured range itself (a single
/// value gets half a decade each side).
fn axis(lo: f64, hi: f64) -> (f64, f64) {
    if hi > lo {
        (lo.log10(), hi.log10())
    } else {
        (lo.log10() - 0.5, hi.log10() + 0.5)
    }
}

fn label(v: f64) -> String {
    let short = |x: f64| {
        let t = format!("{x:.3}");
        t.trim_end_matches('0').trim_end_matches('.').to_string()
    };
    if v >= 1e6 {
        format!("{}M", short(v / 1e6))
    } else if v >= 1e3 {
        format!("{}k", short(v / 1e3))
    } else if v >= 1.0 {
        short(v)
    } else {
        format!("{v:.2e}")
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
    // The axes span what was measured, no more (a size axis ends at --max).
    let (lx0, lx1) = axis(x0, x1);
    let (ly0, ly1) = axis(y0, y1);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axes_end_where_the_measures_end() {
        let t = ticks(1.0, 8.0 * 1048576.0);
        assert_eq!(t.first(), Some(&1.0));
        assert_eq!(t.last(), Some(&8388608.0));
        assert!(t.iter().all(|&v| v <= 8388608.0), "{t:?}");
        // 1e7 would be past the largest size.
        assert!(!t.contains(&1e7));
        let s = chart(
            "t",
            "bytes",
            "Mbps",
            &[Series {
                name: "a".into(),
                points: vec![(1.0, 2.0), (8388608.0, 9000.0)],
            }],
        );
        assert!(s.contains(">8.389M<"), "{s}");
        assert!(!s.contains(">10M<"), "{s}");
        assert_eq!(axis(5.0, 5.0), (5f64.log10() - 0.5, 5f64.log10() + 0.5));
    }
}
