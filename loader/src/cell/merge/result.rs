//! The merged `result.json`: one cell's figures from its loaders' records.
//!
//! Counters add (offered, published, shed, failed, delivered, acked, errors, the
//! adapters' counters); rates over the rated window add (every loader's window is
//! the same window, from the same start instant); fractions are recomputed from the
//! sums against the cell's demand; every latency summary is recomputed from the sum
//! of the loaders' whole-run histograms of that path (`totals.hlog`), never from
//! their percentiles; the loader's CPU is the loaders' CPU over their deliveries.
//! What one loader describes for the cell (its shape, invariants, host, the system's
//! cost as loader 0 sampled it) comes from loader 0, and every loader's own figures
//! stay under `loaders.loaders[]`.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde_json::{json, Map, Value};

use crate::measure::histograms::Summary;

/// Numbers of `v` at `path` (dotted, array indices as numbers).
pub fn at<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    let mut cur = v;
    for part in path.split('.') {
        cur = match cur {
            Value::Object(m) => m.get(part)?,
            Value::Array(a) => a.get(part.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(cur)
}

/// The value at `path`, made if absent (objects only).
pub fn at_mut<'a>(v: &'a mut Value, path: &str) -> Option<&'a mut Value> {
    let mut cur = v;
    for part in path.split('.') {
        cur = match cur {
            Value::Object(m) => m.get_mut(part)?,
            Value::Array(a) => a.get_mut(part.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(cur)
}

pub fn num(v: &Value, path: &str) -> f64 {
    at(v, path).and_then(Value::as_f64).unwrap_or(0.0)
}

fn int(v: &Value, path: &str) -> u64 {
    at(v, path).and_then(Value::as_u64).unwrap_or(0)
}

/// Every numeric leaf of the objects at `path` in `records`, added, written into
/// `out` at `path` (non-numeric leaves keep `out`'s value; nested objects recurse;
/// fields named in `skip` keep `out`'s value).
pub fn sum_numbers(out: &mut Value, records: &[&Value], path: &str, skip: &[&str]) {
    let Some(target) = at_mut(out, path) else {
        return;
    };
    let sources: Vec<&Value> = records.iter().filter_map(|r| at(r, path)).collect();
    add_into(target, &sources, skip);
}

fn add_into(target: &mut Value, sources: &[&Value], skip: &[&str]) {
    match target {
        Value::Object(m) => {
            let keys: Vec<String> = m.keys().cloned().collect();
            for k in keys {
                if skip.contains(&k.as_str()) {
                    continue;
                }
                let subs: Vec<&Value> = sources.iter().filter_map(|s| s.get(&k)).collect();
                if let Some(t) = m.get_mut(&k) {
                    add_into(t, &subs, skip);
                }
            }
        }
        Value::Number(n) => {
            if n.is_u64() && sources.iter().all(|s| s.is_u64()) {
                *target = json!(sources.iter().filter_map(|s| s.as_u64()).sum::<u64>());
            } else if n.is_i64() && sources.iter().all(|s| s.is_i64()) {
                *target = json!(sources.iter().filter_map(|s| s.as_i64()).sum::<i64>());
            } else {
                *target = json!(sources.iter().filter_map(|s| s.as_f64()).sum::<f64>());
            }
        }
        _ => {}
    }
}

/// Replace the summary at `path` with the summary of `h`, its `clamped` and
/// `negative` counts the loaders' added.
pub fn put_summary(out: &mut Value, records: &[&Value], path: &str, h: &Histogram<u64>) {
    let clamped: u64 = records
        .iter()
        .map(|r| int(r, &format!("{path}.clamped")))
        .sum();
    let negative: u64 = records
        .iter()
        .map(|r| int(r, &format!("{path}.negative")))
        .sum();
    let mut s = Summary::of(h, clamped);
    s.negative = negative;
    let value = serde_json::to_value(s).unwrap_or(Value::Null);
    set(out, path, value);
}

/// Set `path` to `value`, making the objects on the way.
pub fn set(out: &mut Value, path: &str, value: Value) {
    let parts: Vec<&str> = path.split('.').collect();
    let mut cur = out;
    for (i, part) in parts.iter().enumerate() {
        let last = i + 1 == parts.len();
        cur = match cur {
            Value::Object(m) => {
                if last {
                    m.insert(part.to_string(), value);
                    return;
                }
                m.entry(part.to_string())
                    .or_insert_with(|| Value::Object(Map::new()))
            }
            Value::Array(a) => match part.parse::<usize>().ok().and_then(|i| a.get_mut(i)) {
                Some(v) => {
                    if last {
                        *v = value;
                        return;
                    }
                    v
                }
                None => return,
            },
            _ => return,
        };
    }
}

/// The worst drain outcome of the loaders.
pub fn worst_drain<'a>(names: impl Iterator<Item = &'a str>) -> String {
    let rank = |n: &str| match n {
        "caught-up" => 0,
        "grace" => 1,
        "unreachable" | "stalled" => 2,
        "cut-short" => 3,
        _ => 4,
    };
    names
        .max_by_key(|n| rank(n))
        .unwrap_or("caught-up")
        .to_string()
}

/// One loader's figures for `loaders.loaders[]`.
pub fn loader_entry(j: u64, r: &Value) -> Value {
    json!({
        "index": j,
        "outcome": at(r, "outcome"),
        "host": at(r, "loaders.host"),
        "clock_start": at(r, "loaders.clock_start"),
        "clock_end": at(r, "loaders.clock_end"),
        "share": at(r, "loaders.share"),
        "namespace": at(r, "loaders.namespace"),
        "offered_rated": num(r, "flows.A.offered_rated") + num(r, "flows.B.offered_rated"),
        "published_rated": num(r, "flows.A.published_rated") + num(r, "flows.B.published_rated"),
        "window_deliveries_per_sec": at(r, "throughput.window_deliveries_per_sec"),
        "cpu_cores_mean": at(r, "loader.cpu_cores_mean"),
        "cpu_us_per_delivery": at(r, "loader.cpu_us_per_delivery"),
        "schedule_lag_p99_ms": at(r, "latency_ms.schedule_lag.p99_ms"),
        "void": at(r, "void"),
        "load": at(r, "load"),
        "drain": at(r, "drain"),
        "warnings": at(r, "warnings"),
    })
}

/// The tags of the loaders' totals that are the same in every loader.
pub fn common_tags(totals: &[BTreeMap<String, Histogram<u64>>]) -> Vec<String> {
    let Some(first) = totals.first() else {
        return Vec::new();
    };
    first
        .keys()
        .filter(|k| totals.iter().all(|t| t.contains_key(*k)))
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_add_and_the_rest_stays() {
        let a = json!({"flows": {"A": {"offered": 3, "rate": 1.5, "name": "x"}}});
        let b = json!({"flows": {"A": {"offered": 4, "rate": 2.0, "name": "y"}}});
        let mut out = a.clone();
        sum_numbers(&mut out, &[&a, &b], "flows", &["skip"]);
        assert_eq!(
            out,
            json!({"flows": {"A": {"offered": 7, "rate": 3.5, "name": "x"}}})
        );
    }

    #[test]
    fn paths_reach_into_arrays_and_objects() {
        let mut v = json!({"streams": [{"a": 1}, {"a": 2}]});
        assert_eq!(num(&v, "streams.1.a"), 2.0);
        set(&mut v, "streams.0.b", json!(5));
        set(&mut v, "latency_ms.e2e_a", json!({"count": 1}));
        assert_eq!(num(&v, "streams.0.b"), 5.0);
        assert_eq!(num(&v, "latency_ms.e2e_a.count"), 1.0);
        assert_eq!(
            worst_drain(["caught-up", "cut-short", "grace"].into_iter()),
            "cut-short"
        );
    }

    #[test]
    fn summaries_come_from_the_summed_histogram() {
        let mut h = crate::measure::histograms::new_hist();
        for v in [1000u64, 2000, 3000, 4000] {
            h.record(v).unwrap();
        }
        let a = json!({"latency_ms": {"e2e_a": {"clamped": 1, "negative": 2}}});
        let b = json!({"latency_ms": {"e2e_a": {"clamped": 0, "negative": 1}}});
        let mut out = a.clone();
        put_summary(&mut out, &[&a, &b], "latency_ms.e2e_a", &h);
        assert_eq!(num(&out, "latency_ms.e2e_a.count"), 4.0);
        assert_eq!(num(&out, "latency_ms.e2e_a.clamped"), 1.0);
        assert_eq!(num(&out, "latency_ms.e2e_a.negative"), 3.0);
        assert!((num(&out, "latency_ms.e2e_a.p50_ms") - 2.0).abs() < 0.01);
    }
}
