//! Where a secret must never be: every file of a cell's record (recursively: result.json,
//! invocation.txt, samples.csv, samples-remote.csv, produced.meta, report.csv, the
//! .hlog files, the stream logs), the console of the run, the HTML report. One helper
//! for every test that hands the harness a credential.

use std::path::{Path, PathBuf};

/// A secret unlikely to occur by chance, with `tag` in it (letters and digits only,
/// so it needs no escaping in a URL, a DSN or SQL).
pub fn make(tag: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("Sx{tag}{}q{nanos}Z", std::process::id())
}

/// Every regular file under `root` (itself when it is a file).
pub fn files_under(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(p) = todo.pop() {
        if p.is_dir() {
            for e in std::fs::read_dir(&p).unwrap() {
                todo.push(e.unwrap().path());
            }
        } else if p.is_file() {
            out.push(p);
        }
    }
    out.sort();
    out
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && hay.windows(needle.len()).any(|w| w == needle)
}

/// Assert `secret` occurs in no file under any of `roots` and in none of `texts`
/// (label, text: a console, a message). Returns how many files were scanned, so a
/// caller can assert the scan saw the record at all.
pub fn assert_nowhere(secret: &str, roots: &[&Path], texts: &[(&str, &str)]) -> usize {
    let mut leaks = Vec::new();
    let mut scanned = 0;
    for root in roots {
        assert!(root.exists(), "{} does not exist", root.display());
        for f in files_under(root) {
            scanned += 1;
            let bytes = std::fs::read(&f).unwrap();
            if contains(&bytes, secret.as_bytes()) {
                let text = String::from_utf8_lossy(&bytes);
                let line = text
                    .lines()
                    .find(|l| l.contains(secret))
                    .unwrap_or("<binary>");
                leaks.push(format!(
                    "{}: {}",
                    f.display(),
                    line.chars().take(300).collect::<String>()
                ));
            }
        }
    }
    for (label, text) in texts {
        if let Some(line) = text.lines().find(|l| l.contains(secret)) {
            leaks.push(format!(
                "{label}: {}",
                line.chars().take(300).collect::<String>()
            ));
        }
    }
    assert!(
        leaks.is_empty(),
        "the secret leaked into {} place(s):\n{}",
        leaks.len(),
        leaks.join("\n")
    );
    scanned
}
