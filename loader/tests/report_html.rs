//! The HTML report of real cells rendered in headless Chromium: the smoke cell on
//! the control broker `mem`, a short pgmq cell (PostgreSQL + pgmq on 127.0.0.1:5432)
//! and a short RabbitMQ cell (127.0.0.1:5672). Chromium takes a screenshot and dumps
//! the DOM after the page's load handler has marked every image that did not
//! decode and counted script errors; the test asserts the tables and images are
//! there, none broken, no script error.
//!
//! Needs /usr/bin/chromium (scripts/provision/chromium.sh). A missing browser or
//! server skips that part with a message, or fails when `CI` is set.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const SCENARIOS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../scenarios");
const CHROMIUM: &str = "/usr/bin/chromium";

/// The server behind one part of the report: without it that part is left out
/// (SKIP when run by hand), or the test fails under `CI`.
fn available(what: &str, addr: &str, provision: &str) -> bool {
    support::reachable(addr, what, provision)
}

/// Run a short cell; returns its directory. Any outcome is fine for the report
/// (a VOID or FAIL cell must render too); the record must exist.
fn run_cell(out: &Path, name: &str, scenario: &str, sets: &[&str]) -> PathBuf {
    let dir = out.join(name);
    let name_set = format!("name={name}");
    let all: Vec<&str> = sets.iter().copied().chain([name_set.as_str()]).collect();
    let (code, text) = support::run_into(&Path::new(SCENARIOS).join(scenario), &all, &dir);
    assert!(
        matches!(code, 0 | 3 | 4 | 8),
        "{name}: exit {code} (0 PASS, 3 FAIL, 4 VOID, 8 PASS but NOT-HELD expected)\n{text}"
    );
    assert!(dir.join("result.json").is_file(), "{name}: no result.json");
    dir
}

/// Whether /usr/bin/chromium is here: without it the test is skipped with a message
/// (fails under `CI`).
fn chromium_present() -> bool {
    if Path::new(CHROMIUM).is_file() {
        return true;
    }
    support::unavailable(
        &format!("{CHROMIUM} missing"),
        "run scripts/provision/chromium.sh",
    );
    false
}

fn chromium(args: &[&str], page: &Path, profile: &Path) -> std::process::Output {
    Command::new(CHROMIUM)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--virtual-time-budget=5000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(format!("file://{}", page.display()))
        .stdin(Stdio::null())
        .output()
        .expect("chromium starts")
}

fn attr(body: &str, name: &str) -> Option<u64> {
    let key = format!("{name}=\"");
    let i = body.find(&key)? + key.len();
    body[i..].split('"').next()?.parse().ok()
}

/// A screenshot of `page` at `size` ("w,h") into `shot`, a PNG of more than
/// `min_bytes` (a blank page is a few kilobytes).
fn screenshot(page: &Path, profile: &Path, size: &str, shot: &Path, min_bytes: usize, name: &str) {
    let o = chromium(
        &[
            &format!("--window-size={size}"),
            &format!("--screenshot={}", shot.display()),
        ],
        page,
        profile,
    );
    assert!(
        o.status.success(),
        "{name}: screenshot: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let png = std::fs::read(shot).expect("screenshot written");
    assert_eq!(&png[1..4], b"PNG", "{name}");
    assert!(
        png.len() > min_bytes,
        "{name}: a screenshot of {} bytes, a blank page?",
        png.len()
    );
}

/// The attributes of a rendered DOM's `<body>` tag (what the load handler marked).
fn body_tag(dom: &str) -> &str {
    dom.split("<body")
        .nth(1)
        .and_then(|b| b.split('>').next())
        .expect("a <body> in the rendered DOM")
}

/// `page`'s DOM as headless Chromium rendered it, after checking what the page's
/// load handler marked on `<body>`: no script error, no broken image, and `images`
/// images decoded.
fn rendered(page: &Path, profile: &Path, images: usize, name: &str) -> String {
    let o = chromium(&["--dump-dom"], page, profile);
    assert!(
        o.status.success(),
        "{name}: dump-dom: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let dom = String::from_utf8_lossy(&o.stdout).into_owned();
    let body = body_tag(&dom);
    assert_eq!(
        attr(body, "data-script-errors"),
        Some(0),
        "{name}: script errors: {body}"
    );
    assert_eq!(
        attr(body, "data-images-broken"),
        Some(0),
        "{name}: broken images: {body}"
    );
    assert_eq!(
        attr(body, "data-images-ok"),
        Some(images as u64),
        "{name}: decoded images: {body}"
    );
    dom
}

/// How many of `page`'s tables are wider than the page in a window `width` pixels
/// wide (the page's load handler counts the boxes that must scroll).
fn overflowing_tables(page: &Path, profile: &Path, width: u32, name: &str) -> u64 {
    let o = chromium(
        &[&format!("--window-size={width},1000"), "--dump-dom"],
        page,
        profile,
    );
    let dom = String::from_utf8_lossy(&o.stdout).into_owned();
    let body = body_tag(&dom);
    assert_eq!(
        attr(body, "data-viewport-width"),
        Some(u64::from(width)),
        "{name}: the window's width: {body}"
    );
    let n = attr(body, "data-tables-overflowing")
        .unwrap_or_else(|| panic!("{name}: no table count: {body}"));
    if n > 0 {
        let which = body
            .split("data-tables-overflowing-which=\"")
            .nth(1)
            .and_then(|w| w.split('"').next())
            .unwrap_or("?");
        eprintln!("{name}: tables wider than the page (class, scroll width > box width): {which}");
    }
    n
}

#[test]
fn report_of_real_cells_renders_in_headless_chromium() {
    if !chromium_present() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("runs");
    let short = ["duration=4s", "warmup=1s", "drain.max=30s"];
    let mut cells = vec![run_cell(
        &runs,
        "smoke",
        "smoke.yaml",
        &["duration=4s", "warmup=1s"],
    )];
    if available("PostgreSQL", "127.0.0.1:5432", "scripts/provision/pgmq.sh") {
        cells.push(run_cell(&runs, "pgmq-short", "pgmq-smoke.yaml", &short));
    }
    if available(
        "RabbitMQ",
        "127.0.0.1:5672",
        "scripts/provision/rabbitmq.sh",
    ) {
        let mut sets = short.to_vec();
        sets.extend(["rate=100", "properties=20"]);
        cells.push(run_cell(&runs, "rabbit-short", "rabbit-smoke.yaml", &sets));
    }
    let out = tmp.path().join("report");
    let status = Command::new(env!("CARGO_BIN_EXE_crossbench"))
        .arg("report")
        .args(&cells)
        .arg("--out")
        .arg(&out)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "crossbench report: {status:?}");
    let page = out.join("index.html").canonicalize().unwrap();
    let html = std::fs::read_to_string(&page).unwrap();
    // The CDF, the sweep when the rates differ, and one time series per cell.
    let images = html.matches("<img ").count();
    assert!(
        images > cells.len(),
        "{images} images for {} cells",
        cells.len()
    );

    let profile = tmp.path().join("chromium-profile");
    let shot = tmp.path().join("report.png");
    screenshot(&page, &profile, "1280,4000", &shot, 50_000, "the report");

    let dom = rendered(&page, &profile, images, "the report");
    assert!(!dom.contains("data-broken=\"1\""));
    for h in ["Cost to serve", "Ceiling", "Cardinality and the cost model"] {
        assert!(dom.contains(&format!("<h3>{h}</h3>")), "table {h} rendered");
    }
    assert!(dom.matches("<table class=").count() >= 3, "tables rendered");
    for c in &cells {
        let name = c.file_name().unwrap().to_string_lossy();
        assert!(
            dom.contains(&format!("<h3 id=\"{name}\">{name}</h3>")),
            "cell {name} has its section"
        );
        assert!(
            dom.contains(&format!("../runs/{name}/result.json")),
            "cell {name} links its raw files"
        );
    }
    if let Ok(keep) = std::env::var("CROSSBENCH_KEEP_REPORT") {
        let keep = PathBuf::from(keep);
        std::fs::create_dir_all(&keep).unwrap();
        std::fs::copy(&shot, keep.join("report-screenshot.png")).unwrap();
        std::fs::copy(&page, keep.join("index.html")).unwrap();
    }
}

/// Bad input to the report subcommands exits 2 and names the path or field and the fix.
#[test]
fn report_subcommands_refuse_bad_input_with_exit_2() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("no-such-cell");
    for args in [
        vec!["table".to_string(), missing.display().to_string()],
        vec!["report".to_string(), missing.display().to_string()],
        vec![
            "compare".to_string(),
            missing.display().to_string(),
            "--published".into(),
            "NO-SUCH-ID".into(),
        ],
    ] {
        let o = Command::new(env!("CARGO_BIN_EXE_crossbench"))
            .args(&args)
            .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("no-such-cell") || err.contains("NO-SUCH-ID"),
            "{args:?}: the message names the input: {err}"
        );
        assert!(
            err.contains("give the directory `crossbench run` wrote")
                || err.contains("crossbench compare --list"),
            "{args:?}: the message says what to do: {err}"
        );
    }
}

/// `crossbench report <this repository's rel>` into a new temporary directory:
/// (the repository's root, the directory, the report's directory).
fn report_of(rel: &str) -> (PathBuf, tempfile::TempDir, PathBuf) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("report");
    let status = Command::new(env!("CARGO_BIN_EXE_crossbench"))
        .arg("report")
        .arg(root.join(rel))
        .arg("--out")
        .arg(&out)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "crossbench report {rel}: {status:?}");
    (root, tmp, out)
}

/// The report of a whole campaign (`results/campaigns/findings`, 100 real cells), as
/// a person opens it: the main page (organised by arm, its pictures linked files),
/// one arm's page, and the findings' forest plot, each rendered in headless Chromium
/// with every image decoded and no script error. With `CROSSBENCH_KEEP_REPORT=<dir>`
/// the screenshots are kept there (docs/report.md shows them).
#[test]
fn a_campaign_report_renders_in_headless_chromium() {
    if !chromium_present() {
        return;
    }
    let (root, tmp, out) = report_of("results/campaigns/findings");
    let index = out.join("index.html").canonicalize().unwrap();
    let arm = out
        .join("arms/findings--f1-pgmq-sparse.html")
        .canonicalize()
        .unwrap();
    let forest = root
        .join("docs/findings-forest.svg")
        .canonicalize()
        .unwrap();
    let profile = tmp.path().join("chromium-profile");
    let mut shots = Vec::new();
    for (page, name, size, html) in [
        (&index, "report-campaign-top.png", "1280,1400", true),
        (&arm, "report-arm-page.png", "1280,1400", true),
        (
            &forest,
            "findings-forest-in-chromium.png",
            "1040,420",
            false,
        ),
    ] {
        let shot = tmp.path().join(name);
        screenshot(page, &profile, size, &shot, 15_000, name);
        if html {
            let text = std::fs::read_to_string(page).unwrap();
            let images = text.matches("<img ").count();
            assert!(images > 0, "{name}: no picture");
            rendered(page, &profile, images, name);
        }
        shots.push(shot);
    }
    // Every table of the main page fits a 1280-pixel window: the campaign's (its
    // intervals under their estimates) and the cost table's 20 columns.
    assert_eq!(
        overflowing_tables(&index, &profile, 1280, "campaign report"),
        0,
        "a table wider than the page at 1280 px"
    );
    if let Ok(keep) = std::env::var("CROSSBENCH_KEEP_REPORT") {
        let keep = PathBuf::from(keep);
        std::fs::create_dir_all(&keep).unwrap();
        for s in &shots {
            std::fs::copy(s, keep.join(s.file_name().unwrap())).unwrap();
        }
    }
}

/// The report of a gate's record (the committed classic-against-quorum gate that
/// found a regression): its section with the picture (each metric's ratio against
/// its τ band) and its table, rendered in headless Chromium with every image
/// decoded; its legs' page likewise. `CROSSBENCH_KEEP_REPORT=<dir>` keeps the
/// screenshot (docs/report.md shows it).
#[test]
fn a_gate_report_renders_in_headless_chromium() {
    if !chromium_present() {
        return;
    }
    let (_root, tmp, out) =
        report_of("results/gates/2026-12-01-rabbit-sparse/classic-vs-quorum-p40");
    let index = out.join("index.html").canonicalize().unwrap();
    let text = std::fs::read_to_string(&index).unwrap();
    assert!(
        text.contains("REGRESSION"),
        "the gate's verdict on the page"
    );
    let legs = out
        .join("gates/classic-vs-quorum-p40.html")
        .canonicalize()
        .unwrap();
    let profile = tmp.path().join("chromium-profile");
    let shot = tmp.path().join("report-gate.png");
    screenshot(
        &index,
        &profile,
        "1280,1100",
        &shot,
        15_000,
        "report-gate.png",
    );
    rendered(
        &index,
        &profile,
        text.matches("<img ").count(),
        "gate report",
    );
    let leg_text = std::fs::read_to_string(&legs).unwrap();
    rendered(
        &legs,
        &profile,
        leg_text.matches("<img ").count(),
        "gate legs",
    );
    if let Ok(keep) = std::env::var("CROSSBENCH_KEEP_REPORT") {
        let keep = PathBuf::from(keep);
        std::fs::create_dir_all(&keep).unwrap();
        std::fs::copy(&shot, keep.join("report-gate.png")).unwrap();
    }
}
