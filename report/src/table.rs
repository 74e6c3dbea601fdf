//! A table as the report builds it: a title, notes that belong to the table
//! itself (comparability warnings, fit quality), and sections of rows. Rendered as
//! Markdown, CSV or HTML from the same value, so the three never disagree.

use std::fmt::Write;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Table {
    pub title: String,
    /// Lines printed with the table (above it in Markdown and HTML, `# ` comments in CSV).
    pub notes: Vec<String>,
    pub columns: Vec<String>,
    pub sections: Vec<Section>,
}

/// Rows that may be read side by side. Rows of different sections may not.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Section {
    /// Shown above the rows (e.g. `durability tier: default`); `None` for the only section.
    pub heading: Option<String>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(title: impl Into<String>, columns: &[&str]) -> Table {
        Table {
            title: title.into(),
            columns: columns.iter().map(|c| c.to_string()).collect(),
            ..Table::default()
        }
    }

    /// All rows of all sections.
    pub fn rows(&self) -> impl Iterator<Item = &Vec<String>> {
        self.sections.iter().flat_map(|s| s.rows.iter())
    }

    /// The value in column `column` of the row whose first cell is `key`.
    pub fn get(&self, key: &str, column: &str) -> Option<&str> {
        let c = self.columns.iter().position(|x| x == column)?;
        self.rows()
            .find(|r| r.first().map(String::as_str) == Some(key))
            .and_then(|r| r.get(c))
            .map(String::as_str)
    }

    /// The section a row (by first cell) is in.
    pub fn section_of(&self, key: &str) -> Option<&Section> {
        self.sections.iter().find(|s| {
            s.rows
                .iter()
                .any(|r| r.first().map(String::as_str) == Some(key))
        })
    }

    pub fn to_markdown(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "### {}\n", self.title);
        for n in &self.notes {
            let _ = writeln!(s, "> {n}");
        }
        if !self.notes.is_empty() {
            s.push('\n');
        }
        for sec in &self.sections {
            if let Some(h) = &sec.heading {
                let _ = writeln!(s, "**{h}**\n");
            }
            let _ = writeln!(s, "| {} |", self.columns.join(" | "));
            let _ = writeln!(
                s,
                "|{}",
                self.columns.iter().map(|_| "---|").collect::<String>()
            );
            for r in &sec.rows {
                let cells: Vec<String> = r.iter().map(|c| c.replace('|', "\\|")).collect();
                let _ = writeln!(s, "| {} |", cells.join(" | "));
            }
            s.push('\n');
        }
        s
    }

    /// CSV: `# crossbench table v1: <title>`, the notes as `# ` lines, a header
    /// with a leading `section` column, then the rows.
    pub fn to_csv(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "# crossbench table v{}: {}",
            crate::OUTPUT_VERSION,
            self.title
        );
        for n in &self.notes {
            let _ = writeln!(s, "# {n}");
        }
        let mut header = vec!["section".to_string()];
        header.extend(self.columns.iter().cloned());
        let _ = writeln!(s, "{}", csv_line(&header));
        for sec in &self.sections {
            for r in &sec.rows {
                let mut line = vec![sec.heading.clone().unwrap_or_default()];
                line.extend(r.iter().cloned());
                let _ = writeln!(s, "{}", csv_line(&line));
            }
        }
        s
    }

    /// `t-` and the title in lower case with dashes (`t-cost-to-serve`).
    pub fn css_class(&self) -> String {
        let slug: String = self
            .title
            .to_lowercase()
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        format!("t-{slug}")
    }

    pub fn to_html(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "<h3>{}</h3>", esc(&self.title));
        for n in &self.notes {
            let _ = writeln!(s, "<p class=\"note\">{}</p>", esc(n));
        }
        for sec in &self.sections {
            if let Some(h) = &sec.heading {
                let _ = writeln!(s, "<p class=\"section\">{}</p>", esc(h));
            }
            let _ = write!(
                s,
                "<div class=\"wide\"><table class=\"{}\">\n<thead><tr>",
                self.css_class()
            );
            for c in &self.columns {
                let _ = write!(s, "<th>{}</th>", heading_html(c));
            }
            s.push_str("</tr></thead>\n<tbody>\n");
            for r in &sec.rows {
                s.push_str("<tr>");
                for (i, c) in r.iter().enumerate() {
                    let column = self.columns.get(i).map_or("", String::as_str);
                    s.push_str(&html_cell(column, c));
                }
                s.push_str("</tr>\n");
            }
            s.push_str("</tbody>\n</table></div>\n");
        }
        s
    }
}

/// A column's heading, free to break after a slash that a word follows
/// (`publishes/<wbr>event`, never `ev/s`).
fn heading_html(c: &str) -> String {
    let parts: Vec<&str> = c.split('/').collect();
    let mut out = esc(parts[0]);
    for p in &parts[1..] {
        out.push('/');
        if p.chars().take_while(|c| c.is_alphabetic()).count() >= 4 {
            out.push_str("<wbr>");
        }
        out.push_str(&esc(p));
    }
    out
}

/// A system label wider than this is shortened on the page (the full label is its
/// tooltip).
pub const SYSTEM_LABEL_CHARS: usize = 18;

/// The cost table's list of what the application had to build: on the page, its
/// count, the list its tooltip.
pub const LIST_COLUMN: &str = "built in app";

/// Columns of words, not figures (the ceiling table's reasons, the gate's
/// verdicts): on the page they wrap, left-aligned.
pub const PROSE_COLUMNS: &[&str] = &["bound by", "first symptom", "verdict"];

/// One cell of an HTML table, so that the table fits the page without wrapping a
/// line (but in [`PROSE_COLUMNS`], which wrap): an interval after its estimate (`172.0 [165.1, 181.2] (≤ 94 %)`) goes on a
/// second, smaller line; a system label (the `system` column) longer than
/// [`SYSTEM_LABEL_CHARS`] is shortened, each `/`-part of its variant cut in the
/// middle, with the full label as the tooltip; a `;`-list in [`LIST_COLUMN`] is
/// counted, the list the tooltip.
pub fn html_cell(column: &str, text: &str) -> String {
    if PROSE_COLUMNS.contains(&column) {
        return format!("<td class=\"prose\">{}</td>", esc(text));
    }
    if column == LIST_COLUMN && text.contains("; ") {
        return format!(
            "<td title=\"{}\">{} items</td>",
            esc(text),
            text.split("; ").count()
        );
    }
    if column == "system" && text.chars().count() > SYSTEM_LABEL_CHARS {
        return format!(
            "<td title=\"{}\">{}</td>",
            esc(text),
            esc(&short_system(text))
        );
    }
    if let Some(at) = text.find(" [") {
        let (estimate, interval) = (&text[..at], &text[at + 1..]);
        if interval.contains(']') && !estimate.is_empty() {
            return format!(
                "<td>{}<br><span class=\"ci\">{}</span></td>",
                esc(estimate),
                esc(interval)
            );
        }
    }
    format!("<td>{}</td>", esc(text))
}

/// `pgmq/read_grouped_head/delete` as `pgmq/read…ed_head/delete`: the system's
/// name whole, each part of the variant cut to 12 characters in the middle (the
/// start and the end of a part are what tell variants apart).
fn short_system(label: &str) -> String {
    let mut parts = label.split('/');
    let mut out = parts.next().unwrap_or_default().to_string();
    for p in parts {
        out.push('/');
        out.push_str(&crate::plot::chart::fit(p, 12));
    }
    out
}

fn csv_line(fields: &[String]) -> String {
    fields
        .iter()
        .map(|f| {
            if f.contains([',', '"', '\n']) {
                format!("\"{}\"", f.replace('"', "\"\""))
            } else {
                f.clone()
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// HTML-escape text.
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_sections_notes_and_quotes() {
        let mut t = Table::new("t", &["cell", "v"]);
        t.notes.push("careful".into());
        t.sections.push(Section {
            heading: Some("tier: default".into()),
            rows: vec![vec!["a".into(), "1,5".into()]],
        });
        let md = t.to_markdown();
        assert!(md.contains("> careful"));
        assert!(md.contains("**tier: default**"));
        let csv = t.to_csv();
        assert!(csv.starts_with("# crossbench table v1: t\n# careful\nsection,cell,v\n"));
        assert!(csv.contains("tier: default,a,\"1,5\""));
        assert_eq!(t.get("a", "v"), Some("1,5"));
        assert!(t.to_html().contains("<td>1,5</td>"));
    }

    /// An interval goes under its estimate, a long system label is shortened with
    /// its full name as the tooltip, a list is counted, anything else is one
    /// escaped line.
    #[test]
    fn html_cells_keep_the_table_narrow() {
        assert_eq!(
            html_cell("e2e p50 ms", "68.9 [68.6, 84.4] (≤ 94 %)"),
            "<td>68.9<br><span class=\"ci\">[68.6, 84.4] (≤ 94 %)</span></td>"
        );
        assert_eq!(
            html_cell("system", "pgmq/read_grouped_head/delete"),
            "<td title=\"pgmq/read_grouped_head/delete\">pgmq/read…ed_head/delete</td>"
        );
        assert_ne!(
            short_system("pgmq/read_grouped_head/delete"),
            short_system("pgmq/read_grouped_rr/delete"),
            "variants stay apart"
        );
        assert_eq!(html_cell("system", "pgmq"), "<td>pgmq</td>");
        assert_eq!(
            html_cell(LIST_COLUMN, "a; b; c"),
            "<td title=\"a; b; c\">3 items</td>"
        );
        assert_eq!(html_cell(LIST_COLUMN, "none"), "<td>none</td>");
        assert_eq!(html_cell("arm", "a<b"), "<td>a&lt;b</td>");
        assert_eq!(html_cell("note", "[x] only"), "<td>[x] only</td>");
        assert_eq!(heading_html("publishes/event"), "publishes/<wbr>event");
        assert_eq!(heading_html("R ev/s"), "R ev/s");
        assert_eq!(
            html_cell("first symptom", "served 44 % in the rated window"),
            "<td class=\"prose\">served 44 % in the rated window</td>"
        );
    }
}
