//! A forest plot: one row per ratio (a finding's check in one sitting, a gate's
//! metric), its estimate as a dot and its interval as a bar on a log axis, the side
//! of 1 where the claim holds shaded on its row, a published ratio as a cross, and the
//! verdict as the colour. Drawn with the layout rules of [`super::chart`]: the
//! plotting area framed in `FRAME`, the legend beside it in a box of its own.

use std::path::Path;

use plotters::prelude::*;

use super::chart::{draw_legend, legend_layout, FRAME};
use super::font::FAMILY;
use super::{write_files, Drawing, Picture};
use crate::error::ReportError;

/// Where a row's claim holds: the shaded band.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Side {
    /// Below 1 (log ratio < 0).
    Below,
    /// Above 1.
    Above,
    /// Within [low, high] of the ratio (a tolerance round 1, a gate's τ band).
    Within(f64, f64),
}

/// The colour class of a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Holds,
    DoesNotHold,
    Inconclusive,
    /// Measured but not judged (a precondition failed, a leg missing).
    NotJudged,
}

impl Verdict {
    fn colour(self) -> RGBColor {
        match self {
            Verdict::Holds => RGBColor(27, 127, 59),
            Verdict::DoesNotHold => RGBColor(176, 0, 32),
            Verdict::Inconclusive => RGBColor(90, 90, 90),
            Verdict::NotJudged => RGBColor(230, 140, 20),
        }
    }
}

/// One row of a forest plot.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub label: String,
    pub estimate: f64,
    pub low: f64,
    pub high: f64,
    pub side: Side,
    pub published: Option<f64>,
    pub verdict: Verdict,
}

/// The words of each verdict's legend entry: `(holds, does not hold, inconclusive,
/// not judged)`.
pub type Words = [&'static str; 4];

/// Draw `rows` into `<base>.png` and `<base>.svg`.
pub fn plot(rows: &[Row], title: &str, words: Words, base: &Path) -> Result<Picture, ReportError> {
    let size = (1000u32, 120 + 26 * rows.len().max(1) as u32);
    write_files(&Forest { rows, title, words }, size, base, title)
}

/// A forest plot to draw.
struct Forest<'a> {
    rows: &'a [Row],
    title: &'a str,
    words: Words,
}

impl Drawing for Forest<'_> {
    fn draw_on<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, plotters::coord::Shift>,
    ) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
        draw(area, self.rows, self.title, self.words)
    }
}

/// The x range (log10 of the ratio) that shows every row, 1 and the published ratios.
fn x_range(rows: &[Row]) -> (f64, f64) {
    let mut lo: f64 = -0.3;
    let mut hi: f64 = 0.3;
    for r in rows {
        for v in [r.low, r.high, r.estimate]
            .into_iter()
            .chain(r.published)
            .chain(match r.side {
                Side::Within(a, b) => vec![a, b],
                _ => vec![],
            })
        {
            if v > 0.0 && v.is_finite() {
                lo = lo.min(v.log10());
                hi = hi.max(v.log10());
            }
        }
    }
    let pad = (hi - lo) * 0.05;
    (lo - pad, hi + pad)
}

fn tick(v: &f64) -> String {
    super::chart::plain(&10f64.powf(*v))
}

fn draw<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    rows: &[Row],
    title: &str,
    words: Words,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    if rows.is_empty() {
        area.draw(&Text::new(
            format!("{title}: no ratio to draw"),
            (20, 20),
            (FAMILY, 16).into_font(),
        ))?;
        return Ok(());
    }
    let mut entries: Vec<(&str, RGBColor)> = vec![
        (words[0], Verdict::Holds.colour()),
        (words[1], Verdict::DoesNotHold.colour()),
        (words[2], Verdict::Inconclusive.colour()),
        (words[3], Verdict::NotJudged.colour()),
    ];
    if rows.iter().any(|r| r.published.is_some()) {
        entries.push(("published ratio (×)", BLACK));
    }
    let (w, h) = area.dim_in_pixel();
    let legend = legend_layout(&entries, w, h.max(200));
    let (plot_area, legend_area) = area.split_horizontally(w.saturating_sub(legend.width));
    let (x0, x1) = x_range(rows);
    let n = rows.len();
    let label_w = rows
        .iter()
        .map(|r| r.label.chars().count())
        .max()
        .unwrap_or(10)
        .min(40) as u32
        * 7
        + 16;
    let labels: Vec<String> = rows.iter().map(|r| r.label.clone()).collect();
    let y_fmt = move |v: &f64| -> String {
        let i = v.round();
        if (v - i).abs() > 1e-6 || i < 0.0 {
            return String::new();
        }
        // Row 0 at the top.
        labels
            .get(n.wrapping_sub(1).wrapping_sub(i as usize))
            .map(|l| l.chars().take(40).collect())
            .unwrap_or_default()
    };
    let mut chart = ChartBuilder::on(&plot_area)
        .caption(title, (FAMILY, 17))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(label_w)
        .build_cartesian_2d(x0..x1, -0.5..(n as f64 - 0.5))?;
    chart
        .configure_mesh()
        .x_desc("ratio (log scale)")
        .x_label_formatter(&tick)
        .y_label_formatter(&y_fmt)
        .y_labels(n + 1)
        .x_labels(10)
        .disable_y_mesh()
        .label_style((FAMILY, 13))
        .light_line_style(RGBColor(235, 235, 235))
        .draw()?;
    let y_of = |i: usize| (n - 1 - i) as f64;
    // The side where each row's claim holds, shaded on its own row.
    let shade = RGBColor(27, 127, 59).mix(0.12);
    chart.draw_series(rows.iter().enumerate().map(|(i, r)| {
        let (a, b) = match r.side {
            Side::Below => (x0, 0.0),
            Side::Above => (0.0, x1),
            Side::Within(lo, hi) => (lo.max(1e-12).log10(), hi.max(1e-12).log10()),
        };
        let y = y_of(i);
        Rectangle::new([(a, y - 0.45), (b, y + 0.45)], shade.filled())
    }))?;
    // Ratio 1.
    chart.draw_series(std::iter::once(PathElement::new(
        vec![(0.0, -0.5), (0.0, n as f64 - 0.5)],
        BLACK.mix(0.5).stroke_width(1),
    )))?;
    for (i, r) in rows.iter().enumerate() {
        let y = y_of(i);
        let c = r.verdict.colour();
        if r.low > 0.0 && r.high > 0.0 {
            chart.draw_series(std::iter::once(PathElement::new(
                vec![(r.low.log10(), y), (r.high.log10(), y)],
                c.stroke_width(3),
            )))?;
        }
        if r.estimate > 0.0 {
            chart.draw_series(std::iter::once(Circle::new(
                (r.estimate.log10(), y),
                5,
                c.filled(),
            )))?;
        }
        if let Some(p) = r.published.filter(|p| *p > 0.0) {
            chart.draw_series(std::iter::once(Cross::new(
                (p.log10(), y),
                6,
                BLACK.stroke_width(2),
            )))?;
        }
    }
    chart.draw_series(std::iter::once(Rectangle::new(
        [(x0, -0.5), (x1, n as f64 - 0.5)],
        FRAME.stroke_width(1),
    )))?;
    draw_legend(&legend_area, &legend, &entries)?;
    Ok(())
}
