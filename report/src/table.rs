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
                let _ = write!(s, "<th>{}</th>", esc(c));
            }
            s.push_str("</tr></thead>\n<tbody>\n");
            for r in &sec.rows {
                s.push_str("<tr>");
                for c in r {
                    let _ = write!(s, "<td>{}</td>", esc(c));
                }
                s.push_str("</tr>\n");
            }
            s.push_str("</tbody>\n</table></div>\n");
        }
        s
    }
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
}
