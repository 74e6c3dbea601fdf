//! One line chart panel, drawn on any plotters backend: linear or log y, a custom
//! x tick formatter, a legend. Every picture is built from these.

use plotters::coord::Shift;
use plotters::prelude::*;

use super::font::FAMILY;
use super::Series;

/// Line colours, distinguishable and print-safe.
pub const PALETTE: &[RGBColor] = &[
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

#[derive(Debug, Clone)]
pub struct Panel {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub log_y: bool,
    pub series: Vec<Series>,
    pub x_fmt: fn(&f64) -> String,
    /// Number of x tick labels to aim for.
    pub x_labels: usize,
    /// Legend in the upper left (else the lower left).
    pub legend_upper: bool,
    /// Draw markers at the points (sparse data such as a sweep).
    pub markers: bool,
}

pub fn plain(v: &f64) -> String {
    let a = v.abs();
    if a >= 10_000.0 {
        format!("{:.0}k", v / 1000.0)
    } else if a >= 100.0 || a == 0.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}").trim_end_matches(".0").to_string()
    } else if a >= 1.0 {
        format!("{v:.2}")
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_string()
    } else {
        format!("{v:.3}")
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_string()
    }
}

/// Tick label of a log10-transformed value: the value itself.
fn from_log(v: &f64) -> String {
    plain(&10f64.powf(*v))
}

fn bounds(series: &[Series], log_y: bool) -> Option<((f64, f64), (f64, f64))> {
    // The points, and the ends of their error bars.
    let bars = series.iter().flat_map(|s| {
        s.points
            .iter()
            .zip(&s.errors)
            .filter_map(|(&(x, _), e)| e.map(|(lo, hi)| [(x, lo), (x, hi)]))
            .flatten()
    });
    let pts: Vec<(f64, f64)> = series
        .iter()
        .flat_map(|s| s.points.iter().copied())
        .chain(bars)
        .filter(|(x, y)| x.is_finite() && y.is_finite() && (!log_y || *y > 0.0))
        .collect();
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    let mut any = false;
    for (x, y) in pts {
        any = true;
        x0 = x0.min(x);
        x1 = x1.max(x);
        y0 = y0.min(y);
        y1 = y1.max(y);
    }
    if !any {
        return None;
    }
    if x1 <= x0 {
        x1 = x0 + 1.0;
    }
    if log_y {
        y0 = y0.log10() - 0.05;
        y1 = y1.log10() + 0.05;
    } else {
        let pad = ((y1 - y0) * 0.08).max(if y1 == 0.0 { 1.0 } else { y1.abs() * 0.05 });
        y0 = if y0 >= 0.0 { 0.0 } else { y0 - pad };
        y1 += pad;
    }
    Some(((x0, x1), (y0, y1)))
}

/// Draw `p` on `area`. A log y axis is drawn as log10 of the values on a linear
/// axis labelled with the values themselves, which gives a label every few
/// percent of a decade instead of one per decade.
pub fn draw<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    p: &Panel,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let Some(((x0, x1), (y0, y1))) = bounds(&p.series, p.log_y) else {
        area.draw(&Text::new(
            format!("{}: no data", p.title),
            (20, 20),
            (FAMILY, 16).into_font(),
        ))?;
        return Ok(());
    };
    let mut chart = ChartBuilder::on(area)
        .caption(p.title.as_str(), (FAMILY, 17))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(64)
        .build_cartesian_2d(x0..x1, y0..y1)?;
    let y_fmt: fn(&f64) -> String = if p.log_y { from_log } else { plain };
    chart
        .configure_mesh()
        .x_desc(p.x_label.as_str())
        .y_desc(p.y_label.as_str())
        .x_label_formatter(&p.x_fmt)
        .y_label_formatter(&y_fmt)
        .x_labels(p.x_labels)
        .y_labels(10)
        .max_light_lines(4)
        .label_style((FAMILY, 13))
        .light_line_style(RGBColor(235, 235, 235))
        .draw()?;
    for (i, s) in p.series.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        let pts: Vec<(f64, f64)> = s
            .points
            .iter()
            .copied()
            .filter(|(x, y)| x.is_finite() && y.is_finite() && (!p.log_y || *y > 0.0))
            .map(|(x, y)| (x, if p.log_y { y.log10() } else { y }))
            .collect();
        chart
            .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))?
            .label(s.label.as_str())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
            });
        if p.markers {
            chart.draw_series(
                pts.iter()
                    .map(|&(x, y)| Circle::new((x, y), 3, color.filled())),
            )?;
        }
        // Error bars: a vertical segment from low to high at each point that has one.
        let t = |v: f64| if p.log_y { v.log10() } else { v };
        let bars: Vec<PathElement<(f64, f64)>> = s
            .points
            .iter()
            .zip(&s.errors)
            .filter_map(|(&(x, _), e)| {
                let (lo, hi) = (*e)?;
                (x.is_finite() && lo.is_finite() && hi.is_finite() && (!p.log_y || lo > 0.0))
                    .then(|| PathElement::new(vec![(x, t(lo)), (x, t(hi))], color.stroke_width(2)))
            })
            .collect();
        chart.draw_series(bars)?;
    }
    if p.series.len() > 1 || !p.series.iter().all(|s| s.label.is_empty()) {
        chart
            .configure_series_labels()
            .position(if p.legend_upper {
                SeriesLabelPosition::UpperLeft
            } else {
                SeriesLabelPosition::LowerLeft
            })
            .background_style(WHITE.mix(0.85))
            .border_style(RGBColor(180, 180, 180))
            .label_font((FAMILY, 13))
            .draw()?;
    }
    Ok(())
}
