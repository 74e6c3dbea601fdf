//! The architecture, checked: one place lists the systems, the loader's top level is
//! a handful of concepts, and the arrows run one way (workloads use the cell
//! lifecycle, the pacing and the measures, never the reverse).

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The source's code with comments removed and every string literal replaced by
/// `""`, and the string literals' contents. A file's `#[cfg(test)]` tail (its unit
/// tests) is left out: tests may name what they test.
fn code_and_strings(src: &str) -> (String, Vec<String>) {
    let src = match src.find("#[cfg(test)]") {
        Some(i) => &src[..i],
        None => src,
    };
    let b = src.as_bytes();
    let (mut code, mut strings) = (String::new(), Vec::new());
    let mut i = 0;
    while i < b.len() {
        if src[i..].starts_with("//") {
            i = src[i..].find('\n').map_or(b.len(), |j| i + j);
        } else if src[i..].starts_with("/*") {
            i = src[i..].find("*/").map_or(b.len(), |j| i + j + 2);
        } else if src[i..].starts_with("r#\"") || src[i..].starts_with("r\"") {
            let hashes = src[i + 1..].chars().take_while(|c| *c == '#').count();
            let open = i + 2 + hashes;
            let close = format!("\"{}", "#".repeat(hashes));
            let end = src[open..].find(&close).map_or(b.len(), |j| open + j);
            strings.push(src[open..end].to_string());
            code.push_str("\"\"");
            i = (end + close.len()).min(b.len());
        } else if b[i] == b'"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != b'"' {
                if b[j] == b'\\' {
                    j += 1;
                }
                j += 1;
            }
            strings.push(src[i + 1..j.min(b.len())].to_string());
            code.push_str("\"\"");
            i = j + 1;
        } else if b[i] == b'\'' && i + 2 < b.len() && (b[i + 2] == b'\'' || b[i + 1] == b'\\') {
            // A char literal ('"', '\n'); lifetimes ('a) fall through as code.
            let end = src[i + 1..].find('\'').map_or(b.len(), |j| i + 1 + j);
            let end = if b[i + 1] == b'\\' && b[i + 2] == b'\'' {
                i + 3
            } else {
                end
            };
            code.push_str("' '");
            i = end + 1;
        } else {
            let c = src[i..].chars().next().unwrap();
            code.push(c);
            i += c.len_utf8();
        }
    }
    (code, strings)
}

/// Identifiers of `code` (words of letters, digits and `_`), with the word before
/// each (for `std::mem`).
fn words(code: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut prev = String::new();
    let mut cur = String::new();
    for c in code.chars().chain([' ']) {
        if c.is_alphanumeric() || c == '_' {
            cur.push(c);
        } else if !cur.is_empty() {
            out.push((prev.clone(), cur.clone()));
            prev = std::mem::take(&mut cur);
        }
    }
    out
}

/// A word that names `system` (its registry name): the module (`pgmq`,
/// `adapters::kafka`) or a type or variant (`Pgmq`, `PgmqOptions`, `RabbitBroker`).
fn names_system(prev: &str, word: &str, system: &str) -> bool {
    if word == system {
        // `std::mem` / `core::mem` are not the control broker.
        return !(system == "mem" && (prev == "std" || prev == "core"));
    }
    let mut camel = system[..1].to_uppercase();
    camel.push_str(&system[1..]);
    // Spellings the code base has used besides the capitalised name.
    let extra: &[&str] = match system {
        "rabbitmq" => &["Rabbit", "RabbitMq"],
        _ => &[],
    };
    [camel.as_str()].iter().chain(extra).any(|c| {
        word.strip_prefix(c).is_some_and(|rest| {
            rest.is_empty() || rest.starts_with(|ch: char| ch.is_uppercase() || ch == '_')
        })
    })
}

/// The only Rust files that may name a system: the registry, and each system's
/// own folder under `adapters/src/`.
fn may_name_systems(p: &Path, systems: &[&str]) -> bool {
    let rel = p.strip_prefix(root()).unwrap_or(p);
    let rel = rel.to_string_lossy().replace('\\', "/");
    let rel = rel.trim_start_matches("./").trim_start_matches("../");
    rel.ends_with("adapters/src/registry.rs")
        || systems
            .iter()
            .any(|s| rel.contains(&format!("adapters/src/{s}/")))
}

#[test]
fn only_the_registry_and_each_systems_folder_name_systems() {
    let systems: Vec<&str> = adapters::System::names();
    assert!(systems.len() >= 5, "{systems:?}");
    let mut files = Vec::new();
    for krate in ["loader", "checker", "sampler", "report", "adapters"] {
        rust_files(&root().join(krate).join("src"), &mut files);
    }
    let mut hits = Vec::new();
    for f in &files {
        if may_name_systems(f, &systems) {
            continue;
        }
        let src = std::fs::read_to_string(f).unwrap();
        let (code, strings) = code_and_strings(&src);
        for (prev, w) in words(&code) {
            for s in &systems {
                if names_system(&prev, &w, s) {
                    hits.push(format!("{}: `{w}` names {s}", f.display()));
                }
            }
        }
        for lit in &strings {
            if systems.contains(&lit.as_str()) {
                hits.push(format!("{}: \"{lit}\"", f.display()));
            }
        }
    }
    assert!(
        hits.is_empty(),
        "systems named outside adapters/src/registry.rs and their own folders \
         (ask the registry instead; scenario files, docs and tests may name them):\n{}",
        hits.join("\n")
    );
}

#[test]
fn the_check_finds_a_system_named_in_code() {
    let (code, strings) = code_and_strings(
        "// pgmq in a comment\nlet k = SystemKind::Pgmq; let q = adapters::queen::QueenOptions::default();\nlet s = \"kafka\"; let m = std::mem::take(&mut x); let r = RabbitBroker::new();\n#[cfg(test)]\nmod tests { const X: &str = \"mem\"; }",
    );
    let w = words(&code);
    let named = |s: &str| w.iter().filter(|(p, x)| names_system(p, x, s)).count();
    assert_eq!(named("pgmq"), 1, "{code}");
    assert_eq!(named("queen"), 2);
    assert_eq!(named("mem"), 0, "std::mem is not the control broker");
    assert_eq!(named("rabbitmq"), 1);
    assert_eq!(strings, vec!["kafka".to_string()]);
    assert!(!names_system("", "Memory", "mem"));
}

#[test]
fn the_loaders_top_level_is_a_handful_of_concepts() {
    let src = root().join("loader/src");
    let entries: Vec<String> = std::fs::read_dir(&src)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    assert!(
        entries.len() <= 12,
        "loader/src has {} entries (at most about 12, each a concept): {entries:?}",
        entries.len()
    );
    for must in [
        "main.rs", "lib.rs", "cli", "scenario", "cell", "pacing", "measure", "record", "console",
        "workload",
    ] {
        assert!(
            entries.iter().any(|e| e == must),
            "{must} missing: {entries:?}"
        );
    }
}

/// The files whose code (comments and strings aside) names any of `paths`.
fn naming(files: &[PathBuf], paths: &[&str]) -> Vec<String> {
    files
        .iter()
        .filter(|f| {
            let (code, _) = code_and_strings(&std::fs::read_to_string(f).unwrap());
            paths.iter().any(|p| code.contains(p))
        })
        .map(|f| f.display().to_string())
        .collect()
}

#[test]
fn the_lifecycle_pacing_and_measures_never_use_a_workload() {
    let mut files = Vec::new();
    for dir in ["cell", "pacing", "measure"] {
        rust_files(&root().join("loader/src").join(dir), &mut files);
    }
    let hits = naming(&files, &["crate::workload", "loader::workload"]);
    assert!(
        hits.is_empty(),
        "these import a workload (the arrows must run from workload down):\n{}",
        hits.join("\n")
    );
    assert!(!files.is_empty());
}

/// The command line is the top: the runner, the campaigns, the cell (its merge
/// included) and everything under them are used by `cli/`, never the reverse, so there
/// is no circle of imports through it.
#[test]
fn nothing_below_the_command_line_imports_it() {
    let src = root().join("loader/src");
    let mut files = Vec::new();
    for entry in std::fs::read_dir(&src).unwrap() {
        let p = entry.unwrap().path();
        if p.is_dir() && p.file_name().unwrap() != "cli" {
            rust_files(&p, &mut files);
        }
    }
    let hits = naming(&files, &["crate::cli", "loader::cli"]);
    assert!(
        hits.is_empty(),
        "these import the command line (the arrows must run from cli down):\n{}",
        hits.join("\n")
    );
    assert!(files.len() > 50, "{} files", files.len());
}
