//! One line chart panel, drawn on any plotters backend: linear or log y, a custom
//! x tick formatter, a legend. Every picture is built from these, and the layout
//! rules hold for every one of them because they are enforced here:
//! - the legend is drawn beside the plotting area, never over it: the panel gives it
//!   a column of its own on the right (more columns when the entries do not fit one),
//!   and a label too long for its column is cut with "…";
//! - a panel has at most [`MAX_SERIES`] legend entries (the caller splits more into
//!   facets: [`super::render`] does), each in its own colour of [`PALETTE`];
//! - the plotting area is framed in [`FRAME`] and the legend box in [`LEGEND_BORDER`],
//!   colours nothing else uses, so a test can find both in the SVG and check that they
//!   never meet.

use plotters::coord::Shift;
use plotters::prelude::*;

use super::font::FAMILY;
use super::Series;

/// Line colours, distinguishable and print-safe: one per legend entry of a panel.
pub const PALETTE: [RGBColor; MAX_SERIES] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
    RGBColor(0, 0, 0),
    RGBColor(255, 187, 120),
];

/// Legend entries (series drawn in full) a panel may have.
pub const MAX_SERIES: usize = 12;

/// The frame round a plotting area.
pub const FRAME: RGBColor = RGBColor(96, 96, 97);
/// The border of a legend box.
pub const LEGEND_BORDER: RGBColor = RGBColor(170, 170, 171);

/// Legend geometry, in pixels at the 13 px legend font.
const LEGEND_CHAR_W: f64 = 7.2;
const LEGEND_ROW_H: i32 = 18;
const LEGEND_SWATCH: i32 = 30;
const LEGEND_PAD: i32 = 8;

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
    /// Draw markers at the points (sparse data such as a sweep).
    pub markers: bool,
}

impl Panel {
    /// The series with a legend entry (faint ones have none).
    pub fn entries(&self) -> usize {
        self.series.iter().filter(|s| !s.faint).count()
    }
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

/// The legend entries of `p`: each labelled series not drawn faint, in its colour
/// (`colours`, one per series).
fn legend_entries<'a>(p: &'a Panel, colours: &[RGBColor]) -> Vec<(&'a str, RGBColor)> {
    p.series
        .iter()
        .zip(colours)
        .filter(|(s, _)| !s.faint && !s.label.is_empty())
        .map(|(s, c)| (s.label.as_str(), *c))
        .collect()
}

/// The width the legend of `p` takes on an area of `w` × `h` pixels.
pub fn legend_width(p: &Panel, w: u32, h: u32) -> u32 {
    legend_layout(&legend_entries(p, &colours(p)), w, h).width
}

/// Each series' colour: by legend entry; a faint series (a repeat behind its median)
/// takes the colour of the entry after it.
fn colours(p: &Panel) -> Vec<RGBColor> {
    let mut colours = vec![PALETTE[0]; p.series.len()];
    let mut following = p.entries().saturating_sub(1);
    let mut entry = p.entries();
    for (i, s) in p.series.iter().enumerate().rev() {
        if !s.faint {
            entry -= 1;
            following = entry;
        }
        colours[i] = PALETTE[following % MAX_SERIES];
    }
    colours
}

/// Draw `p` on `area`. A log y axis is drawn as log10 of the values on a linear
/// axis labelled with the values themselves, which gives a label every few
/// percent of a decade instead of one per decade.
/// The legend's column is at least `legend_min` pixels wide, so that panels stacked in
/// one picture share one x extent.
pub fn draw<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    p: &Panel,
    legend_min: u32,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let Some(((x0, x1), (y0, y1))) = bounds(&p.series, p.log_y) else {
        area.draw(&Text::new(
            format!("{}: no data", p.title),
            (20, 20),
            (FAMILY, 16).into_font(),
        ))?;
        return Ok(());
    };
    // Markers (a sweep's points) are kept off the frame's edges.
    let (x0, x1) = if p.markers {
        let pad = (x1 - x0) * 0.03;
        (x0 - pad, x1 + pad)
    } else {
        (x0, x1)
    };
    let colours = colours(p);
    let entries = legend_entries(p, &colours);
    let (w, h) = area.dim_in_pixel();
    let legend = legend_layout(&entries, w, h);
    let (plot_area, legend_area) =
        area.split_horizontally(w.saturating_sub(legend.width.max(legend_min)));
    // The title left-aligned over the whole panel (a caption centred on the plotting
    // area alone would run off its left edge), cut to the panel's width.
    let title_chars = ((w as f64 - 24.0) / 8.5).max(10.0) as usize;
    area.draw(&Text::new(
        fit(&p.title, title_chars),
        (12, 8),
        (FAMILY, 17).into_font(),
    ))?;
    let mut chart = ChartBuilder::on(&plot_area)
        .margin(12)
        .margin_top(36)
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
    for (s, &color) in p.series.iter().zip(&colours) {
        let pts: Vec<(f64, f64)> = s
            .points
            .iter()
            .copied()
            .filter(|(x, y)| x.is_finite() && y.is_finite() && (!p.log_y || *y > 0.0))
            .map(|(x, y)| (x, if p.log_y { y.log10() } else { y }))
            .collect();
        if s.faint {
            chart.draw_series(LineSeries::new(pts, color.mix(0.25).stroke_width(1)))?;
            continue;
        }
        chart.draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))?;
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
    chart.draw_series(std::iter::once(Rectangle::new(
        [(x0, y0), (x1, y1)],
        FRAME.stroke_width(1),
    )))?;
    draw_legend(&legend_area, &legend, &entries)?;
    Ok(())
}

/// Where the legend goes: its width, and its entries' columns and rows.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LegendLayout {
    pub width: u32,
    pub columns: usize,
    pub rows: usize,
    pub column_width: u32,
    /// Characters of a label that fit its column.
    pub chars: usize,
}

/// The legend of `entries` beside a panel of `w` × `h` pixels: a column as wide as
/// the longest label needs (at most 40 % of the panel, labels cut to fit), and as
/// many columns as the rows that fit the panel's height require.
pub(crate) fn legend_layout(entries: &[(&str, RGBColor)], w: u32, h: u32) -> LegendLayout {
    if entries.is_empty() {
        return LegendLayout {
            width: 0,
            columns: 0,
            rows: 0,
            column_width: 0,
            chars: 0,
        };
    }
    let longest = entries
        .iter()
        .map(|(l, _)| l.chars().count())
        .max()
        .unwrap_or(0);
    let rows_fit = ((h as i32 - 2 * LEGEND_PAD - 24) / LEGEND_ROW_H).max(1) as usize;
    let columns = entries.len().div_ceil(rows_fit);
    let rows = entries.len().div_ceil(columns);
    let budget = (w as f64 * 0.4) as u32 / columns as u32;
    let want = (longest as f64 * LEGEND_CHAR_W).ceil() as u32
        + 1
        + LEGEND_SWATCH as u32
        + 2 * LEGEND_PAD as u32;
    let column_width = want.min(budget).max(60);
    let chars = ((column_width as f64 - (LEGEND_SWATCH + 2 * LEGEND_PAD) as f64) / LEGEND_CHAR_W)
        .max(3.0) as usize;
    LegendLayout {
        width: column_width * columns as u32 + 2 * LEGEND_PAD as u32,
        columns,
        rows,
        column_width,
        chars,
    }
}

/// `label` cut to `chars` characters by taking out its middle ("…" in its place): a
/// label's start names the system and its end the figure (p50, p99, the repeats), so
/// both stay.
pub(crate) fn fit(label: &str, chars: usize) -> String {
    let n = label.chars().count();
    if n <= chars {
        return label.to_string();
    }
    let keep = chars.saturating_sub(1);
    let head = keep * 2 / 5;
    let tail = keep - head;
    let mut s: String = label.chars().take(head).collect();
    s.push('…');
    s.extend(label.chars().skip(n - tail));
    s
}

pub(crate) fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    l: &LegendLayout,
    entries: &[(&str, RGBColor)],
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    if entries.is_empty() {
        return Ok(());
    }
    let top = 36; // below the panel's title, level with the plotting area
    let box_w = l.column_width as i32 * l.columns as i32;
    let box_h = l.rows as i32 * LEGEND_ROW_H + LEGEND_PAD;
    area.draw(&Rectangle::new(
        [(LEGEND_PAD / 2, top), (LEGEND_PAD / 2 + box_w, top + box_h)],
        LEGEND_BORDER.stroke_width(1),
    ))?;
    for (i, (label, color)) in entries.iter().enumerate() {
        let (col, row) = (i / l.rows, i % l.rows);
        let x = LEGEND_PAD + col as i32 * l.column_width as i32;
        let y = top + LEGEND_PAD / 2 + row as i32 * LEGEND_ROW_H + LEGEND_ROW_H / 2;
        area.draw(&PathElement::new(
            vec![(x, y), (x + LEGEND_SWATCH - 10, y)],
            color.stroke_width(2),
        ))?;
        area.draw(&Text::new(
            fit(label, l.chars),
            (x + LEGEND_SWATCH - 4, y - 7),
            (FAMILY, 13).into_font(),
        ))?;
    }
    Ok(())
}

#[cfg(test)]
mod layout_tests {
    use super::*;

    #[test]
    fn a_cut_label_keeps_its_start_and_its_end() {
        let l = "pgmq/read_grouped_head/delete [default] P=100 lanes=100 p50";
        let f = fit(l, 30);
        assert_eq!(f.chars().count(), 30, "{f}");
        assert!(
            f.starts_with("pgmq/read_") && f.ends_with("lanes=100 p50"),
            "{f}"
        );
        assert_eq!(fit("short", 30), "short");
    }

    #[test]
    fn a_tall_legend_takes_more_columns_and_never_half_the_panel() {
        let entries: Vec<(&str, RGBColor)> = (0..12).map(|_| ("a label", PALETTE[0])).collect();
        let one = legend_layout(&entries, 900, 450);
        assert_eq!((one.columns, one.rows), (1, 12));
        let two = legend_layout(&entries, 900, 150);
        assert!(two.columns > 1, "{two:?}");
        assert!(two.rows * two.columns >= 12);
        let label = "a very long label that would take most of the panel if it could";
        let long: Vec<(&str, RGBColor)> = vec![(label, PALETTE[1]), (label, PALETTE[2])];
        let l = legend_layout(&long, 900, 450);
        assert!(l.width <= 900 * 2 / 5 + 16, "{l:?}");
    }
}
