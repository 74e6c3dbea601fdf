//! The layout rules read back off a drawn SVG: the plotting areas are the rectangles
//! stroked in [`FRAME`], the legend boxes those stroked in [`LEGEND_BORDER`], and a
//! legend's entries the texts inside its box. [`faults`] says, in words, where a
//! figure breaks a rule: a legend box that meets a plotting area, a legend of more
//! than [`MAX_SERIES`] entries, a figure with data and no plotting area. The tests of
//! every picture the harness draws (reports, the findings' forest, a gate's) use it.

use plotters::style::RGBColor;

use super::chart::{FRAME, LEGEND_BORDER, MAX_SERIES};

/// A rectangle in pixels: x0, y0, x1, y1.
pub type Rect = (f64, f64, f64, f64);

/// A colour as an SVG writes it: `#RRGGBB`.
pub fn hex(c: RGBColor) -> String {
    format!("#{:02X}{:02X}{:02X}", c.0, c.1, c.2)
}

/// The value of attribute `name` in the tag `tag`.
fn attr(tag: &str, name: &str) -> Option<f64> {
    let at = tag.find(&format!(" {name}=\""))? + name.len() + 3;
    let end = tag[at..].find('"')? + at;
    tag[at..end].parse().ok()
}

/// The rectangles of `svg` stroked in `colour` (`#RRGGBB`, any case).
pub fn rects(svg: &str, colour: &str) -> Vec<Rect> {
    let stroke = format!("STROKE=\"{}\"", colour.to_uppercase());
    svg.split('<')
        .filter(|t| t.starts_with("rect ") && t.to_uppercase().contains(&stroke))
        .filter_map(|t| {
            let (x, y) = (attr(t, "x")?, attr(t, "y")?);
            Some((x, y, x + attr(t, "width")?, y + attr(t, "height")?))
        })
        .collect()
}

/// The plotting areas of `svg`.
pub fn plot_areas(svg: &str) -> Vec<Rect> {
    rects(svg, &hex(FRAME))
}

/// The legend boxes of `svg`.
pub fn legends(svg: &str) -> Vec<Rect> {
    rects(svg, &hex(LEGEND_BORDER))
}

/// The anchor points of `svg`'s texts.
fn texts(svg: &str) -> Vec<(f64, f64)> {
    svg.split('<')
        .filter(|t| t.starts_with("text "))
        .filter_map(|t| Some((attr(t, "x")?, attr(t, "y")?)))
        .collect()
}

fn meet(a: Rect, b: Rect) -> bool {
    a.0 < b.2 && b.0 < a.2 && a.1 < b.3 && b.1 < a.3
}

/// What is wrong with one SVG, in words (empty: nothing).
pub fn faults(svg: &str) -> Vec<String> {
    let plots = plot_areas(svg);
    let mut out = Vec::new();
    if plots.is_empty() && !svg.contains("no data") && !svg.contains("no ratio") {
        out.push("no plotting area found (no rectangle stroked in chart::FRAME)".into());
    }
    let anchors = texts(svg);
    for l in legends(svg) {
        for p in &plots {
            if meet(l, *p) {
                out.push(format!("legend {l:?} overlaps plotting area {p:?}"));
            }
        }
        let inside = anchors
            .iter()
            .filter(|&&(x, y)| x >= l.0 && x <= l.2 && y >= l.1 && y <= l.3)
            .count();
        if inside > MAX_SERIES {
            out.push(format!(
                "legend {l:?} has {inside} entries, more than {MAX_SERIES}"
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The checks see what they are meant to: a legend drawn over the plot, and a
    /// legend of too many entries, are both caught.
    #[test]
    fn the_checks_catch_an_overlap_and_a_crowded_legend() {
        let frame = hex(FRAME);
        let legend = hex(LEGEND_BORDER);
        let over = format!(
            "<svg><rect x=\"70\" y=\"40\" width=\"600\" height=\"300\" stroke=\"{frame}\"/><rect x=\"80\" y=\"50\" width=\"100\" height=\"40\" stroke=\"{legend}\"/></svg>"
        );
        assert!(
            faults(&over).iter().any(|f| f.contains("overlaps")),
            "{:?}",
            faults(&over)
        );
        let mut crowded = format!(
            "<svg><rect x=\"70\" y=\"40\" width=\"600\" height=\"300\" stroke=\"{frame}\"/><rect x=\"700\" y=\"40\" width=\"100\" height=\"300\" stroke=\"{legend}\"/>"
        );
        for i in 0..13 {
            crowded.push_str(&format!(
                "<text x=\"710\" y=\"{}\">s{i}</text>",
                50 + i * 18
            ));
        }
        assert!(
            faults(&crowded).iter().any(|f| f.contains("13 entries")),
            "{:?}",
            faults(&crowded)
        );
        assert!(faults(&crowded.replace("13", "")).len() == 1);
    }
}
