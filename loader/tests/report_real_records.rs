//! The report reads real records: a smoke cell (pipeline) and a stream cell on the
//! control broker, made in this test, then `crossbench table` and `crossbench report`
//! over them. Every figure checked in the tables is compared with the same figure in
//! the cell's own `result.json` (the p50 shown is the p50 recorded), so a key renamed
//! on either side fails here instead of turning a column into "—" or 0.

mod support;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::Value;
use support::{binary, result, run_into, scenario};

/// VOID is not what this test is about: a loaded machine must not hide the figures.
const RELAX: [&str; 3] = [
    "void.loader_cpu_max=1",
    "void.schedule_lag_p99_max=10s",
    "held.exploratory=true",
];

fn cell(out: &Path, name: &str, scn: &str, sets: &[&str]) -> PathBuf {
    let dir = out.join(name);
    let name_set = format!("name={name}");
    let all: Vec<&str> = sets
        .iter()
        .copied()
        .chain(RELAX)
        .chain([name_set.as_str()])
        .collect();
    let (code, text) = run_into(&scenario(scn), &all, &dir);
    assert_eq!(code, 0, "{name}: {text}");
    dir
}

/// One CSV line, with double-quoted fields.
fn csv_fields(line: &str) -> Vec<String> {
    let (mut out, mut cur, mut quoted) = (Vec::new(), String::new(), false);
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' if quoted && chars.peek() == Some(&'"') => {
                cur.push('"');
                chars.next();
            }
            '"' => quoted = !quoted,
            ',' if !quoted => out.push(std::mem::take(&mut cur)),
            c => cur.push(c),
        }
    }
    out.push(cur);
    out
}

/// The tables of `crossbench table --format csv`: title → rows, each row a map from
/// column header to cell text.
fn tables(text: &str) -> HashMap<String, Vec<HashMap<String, String>>> {
    let mut all = HashMap::new();
    let mut title = String::new();
    let mut header: Vec<String> = Vec::new();
    for line in text.lines() {
        if let Some(t) = line.strip_prefix("# crossbench table v1: ") {
            title = t.to_string();
            header.clear();
        } else if line.starts_with('#') || line.trim().is_empty() {
            continue;
        } else if header.is_empty() {
            header = csv_fields(line);
        } else {
            let row = header.iter().cloned().zip(csv_fields(line)).collect();
            all.entry(title.clone()).or_insert_with(Vec::new).push(row);
        }
    }
    all
}

fn row<'a>(
    t: &'a HashMap<String, Vec<HashMap<String, String>>>,
    table: &str,
    cell: &str,
) -> &'a HashMap<String, String> {
    t.get(table)
        .unwrap_or_else(|| panic!("no table {table}: {:?}", t.keys()))
        .iter()
        .find(|r| r.get("cell").map(String::as_str) == Some(cell))
        .unwrap_or_else(|| panic!("no row for {cell} in {table}"))
}

/// A figure as a table prints it ("170 595", "100 %", "676.4"), as a number; "—" and
/// anything else that is not a number fail with the column's name.
fn num(r: &HashMap<String, String>, col: &str) -> f64 {
    let text = r
        .get(col)
        .unwrap_or_else(|| panic!("no column {col:?} in {r:?}"));
    text.replace([' ', '\u{202f}', '%'], "")
        .parse()
        .unwrap_or_else(|_| panic!("column {col:?} shows {text:?}, not a figure"))
}

/// `shown` is `recorded` rounded to `decimals`.
fn shows(r: &HashMap<String, String>, col: &str, recorded: f64, decimals: i32) {
    let shown = num(r, col);
    let half = 0.5 * 10f64.powi(-decimals) + 1e-9;
    assert!(
        (shown - recorded).abs() <= half,
        "column {col:?} shows {shown}, result.json records {recorded}"
    );
}

/// The number at dotted `path` of a result.json.
fn at(r: &Value, path: &str) -> f64 {
    let v = path.split('.').fold(r, |v, k| &v[k]);
    v.as_f64()
        .unwrap_or_else(|| panic!("result.json has no number at {path}: {v}"))
}

#[test]
fn tables_and_html_show_what_the_records_hold() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("runs");
    let smoke = cell(
        &runs,
        "real-smoke",
        "smoke.yaml",
        &["duration=3s", "warmup=1s"],
    );
    let stream = cell(
        &runs,
        "real-stream",
        "stream-smoke.yaml",
        &["duration=2s", "warmup=0s"],
    );
    let (rs, rt) = (result(&smoke), result(&stream));

    let o = binary()
        .arg("table")
        .args([&smoke, &stream])
        .args(["--format", "csv"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let t = tables(&text);

    // Cost to serve: every column read from result.json.
    let cost = row(&t, "Cost to serve", "real-smoke");
    assert_eq!(cost["system"], rs["system"].as_str().unwrap());
    assert_eq!(cost["tier"], rs["durability"].as_str().unwrap());
    assert_eq!(cost["outcome"], rs["outcome"].as_str().unwrap());
    shows(cost, "R ev/s", at(&rs, "workload.rate_events_per_sec"), 0);
    shows(cost, "P", at(&rs, "workload.properties"), 0);
    shows(
        cost,
        "ordered lanes",
        at(&rs, "provisioned.ordered_lanes"),
        0,
    );
    shows(cost, "queues", at(&rs, "provisioned.physical_queues"), 0);
    shows(
        cost,
        "consumers",
        at(&rs, "provisioned.consumer_members"),
        0,
    );
    shows(
        cost,
        "served",
        100.0 * at(&rs, "throughput.served_fraction"),
        0,
    );
    shows(cost, "cores", at(&rs, "cost.system_cores_mean"), 2);
    shows(
        cost,
        "publishes/event",
        at(&rs, "cost.physical_publishes_per_ingress_event"),
        2,
    );
    let lat = &rs["latency_ms"];
    let worse = |q: &str| at(lat, &format!("e2e_a.{q}")).max(at(lat, &format!("e2e_b.{q}")));
    assert!(worse("p50_ms") > 0.0, "{lat}");
    shows(cost, "e2e p50 ms", worse("p50_ms"), 1);
    shows(cost, "e2e p99 ms", worse("p99_ms"), 1);
    let totals = &rs["verdict"]["totals"];
    shows(cost, "dups", at(totals, "duplicates"), 0);
    shows(cost, "gaps", at(totals, "gaps"), 0);
    shows(cost, "violations", at(totals, "order_violations"), 0);

    // Cardinality: the delivery rate and the same latencies.
    let card = row(&t, "Cardinality and the cost model", "real-smoke");
    shows(card, "msg/s", at(&rs, "throughput.deliveries_per_sec"), 0);
    shows(card, "mCPU", 1000.0 * at(&rs, "cost.system_cores_mean"), 0);
    shows(card, "e2e p50 ms", worse("p50_ms"), 1);
    shows(card, "e2e p99 ms", worse("p99_ms"), 1);

    // The stream cell is not a pipeline cell: the tables say they left it out.
    assert!(
        text.contains("left out: 1 stream-workload cell(s) (real-stream)"),
        "{text}"
    );

    // The HTML report: both cells' sections, their figures as recorded.
    let out = tmp.path().join("report");
    let o = binary()
        .arg("report")
        .args([&smoke, &stream])
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let html = std::fs::read_to_string(out.join("index.html")).unwrap();
    let section = |name: &str| -> String {
        let start = html
            .find(&format!("<h3 id=\"{name}\">{name}</h3>"))
            .unwrap_or_else(|| panic!("no section for {name}"));
        html[start..].split("<figure>").next().unwrap().to_string()
    };
    let s = section("real-smoke");
    for want in [
        format!(
            "R = {}, P = {}",
            rs["workload"]["rate_events_per_sec"], rs["workload"]["properties"]
        ),
        format!("durability tier {}", rs["durability"].as_str().unwrap()),
        format!("{:.0} s rated", at(&rs, "time.rated_sec")),
        format!(
            "Outcome: <span class=\"PASS\">{}</span>",
            rs["outcome"].as_str().unwrap()
        ),
        "checker verdict: PASS".to_string(),
    ] {
        assert!(s.contains(&want), "smoke section lacks {want:?}:\n{s}");
    }
    let s = section("real-stream");
    for want in [
        format!(
            "stream workload, {} msg/s over {} partitions",
            rt["workload"]["rate_msgs_per_sec"], rt["workload"]["space"]
        ),
        format!("{:.0} s rated", at(&rt, "time.rated_sec")),
        format!(
            "Outcome: <span class=\"PASS\">{}</span>",
            rt["outcome"].as_str().unwrap()
        ),
    ] {
        assert!(s.contains(&want), "stream section lacks {want:?}:\n{s}");
    }
    // The cost table of the page holds the smoke cell's p50 as recorded.
    let p50 = format!("{:.1}", worse("p50_ms"));
    let table_html = html
        .split("<h3>Cost to serve</h3>")
        .nth(1)
        .and_then(|x| x.split("</table>").next())
        .expect("the cost table in the page");
    assert!(
        table_html.contains(&format!("<td>{p50}</td>")),
        "the page's cost table lacks the recorded p50 {p50}:\n{table_html}"
    );
}
