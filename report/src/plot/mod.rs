//! Plots drawn with `plotters` into PNG and SVG, text in the embedded DejaVu Sans
//! (no system font library). One file per picture: [`cdf`] (latency CDF per cell
//! on a log percentile axis), [`sweep`] (latency against offered rate), and
//! [`timeseries`] (per-cell rate, lag, e2e, CPU and memory over time).

pub mod cdf;
pub mod chart;
pub mod font;
pub mod forest;
pub mod geometry;
pub mod sweep;
pub mod timeseries;

use std::path::{Path, PathBuf};

use crate::error::ReportError;

/// Files written for one picture.
#[derive(Debug, Clone, PartialEq)]
pub struct Picture {
    pub title: String,
    pub png: PathBuf,
    pub svg: PathBuf,
}

/// One labelled line.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Series {
    pub label: String,
    pub points: Vec<(f64, f64)>,
    /// An error bar (low, high) per point, drawn when given (medians of repeats and
    /// their intervals); empty for plain lines.
    pub errors: Vec<Option<(f64, f64)>>,
    /// Drawn thin and pale, with no legend entry, in the colour of the series after
    /// it: the repeats behind their median.
    pub faint: bool,
}

/// A file-name-safe form of a label.
pub fn slug(s: &str) -> String {
    let mut out: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect();
    out.truncate(80);
    out
}

pub(crate) fn plot_err(what: &Path, e: impl std::fmt::Debug) -> ReportError {
    ReportError::Plot {
        what: what.display().to_string(),
        message: format!("{e:?}"),
    }
}

/// `panels` with every panel of more than [`chart::MAX_SERIES`] legend entries split
/// into facets of at most that many, each titled with the entries it shows ("series
/// 13–24 of 80"); a faint series goes with the entry after it.
pub fn facets(panels: &[chart::Panel]) -> Vec<chart::Panel> {
    let mut out = Vec::new();
    for p in panels {
        let n = p.entries();
        if n <= chart::MAX_SERIES {
            out.push(p.clone());
            continue;
        }
        let count = n.div_ceil(chart::MAX_SERIES);
        let per = n.div_ceil(count);
        let mut groups: Vec<Vec<Series>> = vec![Vec::new(); count];
        let mut seen = 0usize;
        for s in &p.series {
            let g = (seen / per).min(count - 1);
            if !s.faint {
                seen += 1;
            }
            groups[g].push(s.clone());
        }
        let mut first = 1usize;
        for g in groups {
            let entries = g.iter().filter(|s| !s.faint).count();
            let last = first + entries - 1;
            out.push(chart::Panel {
                title: format!("{} (series {first}–{last} of {n})", p.title),
                series: g,
                ..p.clone()
            });
            first = last + 1;
        }
    }
    out
}

/// A picture that draws itself on any plotters backend, so that one routine
/// ([`write_files`]) writes its PNG and its SVG.
pub(crate) trait Drawing {
    fn draw_on<DB: plotters::prelude::DrawingBackend>(
        &self,
        area: &plotters::prelude::DrawingArea<DB, plotters::coord::Shift>,
    ) -> Result<(), plotters::prelude::DrawingAreaErrorKind<DB::ErrorType>>;
}

/// Draw `d` into `<base>.png` and `<base>.svg` of `size` pixels, on white.
pub(crate) fn write_files(
    d: &impl Drawing,
    size: (u32, u32),
    base: &Path,
    title: &str,
) -> Result<Picture, ReportError> {
    use plotters::prelude::*;
    font::ensure();
    let png = base.with_extension("png");
    let svg = base.with_extension("svg");
    if let Some(parent) = base.parent() {
        std::fs::create_dir_all(parent).map_err(|e| ReportError::io(parent, e))?;
    }
    {
        let root = BitMapBackend::new(&png, size).into_drawing_area();
        root.fill(&WHITE).map_err(|e| plot_err(&png, e))?;
        d.draw_on(&root).map_err(|e| plot_err(&png, e))?;
        root.present().map_err(|e| plot_err(&png, e))?;
    }
    {
        let root = SVGBackend::new(&svg, size).into_drawing_area();
        root.fill(&WHITE).map_err(|e| plot_err(&svg, e))?;
        d.draw_on(&root).map_err(|e| plot_err(&svg, e))?;
        root.present().map_err(|e| plot_err(&svg, e))?;
    }
    Ok(Picture {
        title: title.to_string(),
        png,
        svg,
    })
}

/// Panels stacked vertically, their legends one width.
struct Stack<'a> {
    panels: &'a [chart::Panel],
    legend_min: u32,
}

impl Drawing for Stack<'_> {
    fn draw_on<DB: plotters::prelude::DrawingBackend>(
        &self,
        area: &plotters::prelude::DrawingArea<DB, plotters::coord::Shift>,
    ) -> Result<(), plotters::prelude::DrawingAreaErrorKind<DB::ErrorType>> {
        for (a, p) in area
            .split_evenly((self.panels.len(), 1))
            .iter()
            .zip(self.panels)
        {
            chart::draw(a, p, self.legend_min)?;
        }
        Ok(())
    }
}

/// Draw `panels` stacked vertically into `<base>.png` and `<base>.svg`, `size` being
/// the picture's size before facets: each facet a panel of its own adds its height.
pub fn render(
    panels: &[chart::Panel],
    size: (u32, u32),
    base: &Path,
    title: &str,
) -> Result<Picture, ReportError> {
    let faceted = facets(panels);
    let per_panel = size.1 / panels.len().max(1) as u32;
    let size = (size.0, per_panel * faceted.len().max(1) as u32);
    // One legend width for every panel, so that stacked panels share an x extent.
    let legend_min = faceted
        .iter()
        .map(|p| chart::legend_width(p, size.0, per_panel))
        .max()
        .unwrap_or(0);
    let stack = Stack {
        panels: &faceted,
        legend_min,
    };
    write_files(&stack, size, base, title)
}
