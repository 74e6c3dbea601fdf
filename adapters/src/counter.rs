//! Counters shared between tasks, and their snapshot for the record.
//!
//! A [`Counter`] is a relaxed atomic count that serialises as its value, so a struct
//! of counters derives `Serialize` and its snapshot for `result.json`
//! (`broker_stats`) comes from [`snapshot`] instead of a hand-written list of keys.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Serialize, Serializer};

/// A count that only grows, bumped from any task.
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    pub const fn new() -> Counter {
        Counter(AtomicU64::new(0))
    }

    pub fn add(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }

    pub fn inc(&self) {
        self.add(1);
    }

    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

impl Serialize for Counter {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(self.get())
    }
}

/// Every number in `stats` (a struct of [`Counter`]s and plain numbers, or maps of
/// them) as `<prefix><field>` → value; nested maps add `<key>_` to the prefix.
/// Fields that are not numbers (text, flags) are left out.
pub fn snapshot<T: Serialize + ?Sized>(prefix: &str, stats: &T) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    if let Ok(v) = serde_json::to_value(stats) {
        flatten(prefix, &v, &mut out);
    }
    out
}

fn flatten(prefix: &str, v: &serde_json::Value, out: &mut BTreeMap<String, u64>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, v) in m {
                match v {
                    serde_json::Value::Object(_) => flatten(&format!("{prefix}{k}_"), v, out),
                    _ => {
                        if let Some(n) = v.as_u64() {
                            out.insert(format!("{prefix}{k}"), n);
                        }
                    }
                }
            }
        }
        _ => {
            if let Some(n) = v.as_u64() {
                out.insert(prefix.trim_end_matches('_').to_string(), n);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default, Serialize)]
    struct Stats {
        published: Counter,
        acked: Counter,
        #[serde(skip)]
        _private: u8,
        errors: BTreeMap<String, u64>,
    }

    #[test]
    fn snapshot_is_derived_from_the_fields() {
        let s = Stats::default();
        s.published.add(3);
        s.acked.inc();
        let mut s = s;
        s.errors.insert("publish_timeout".into(), 2);
        let m = snapshot("x_", &s);
        assert_eq!(m["x_published"], 3);
        assert_eq!(m["x_acked"], 1);
        assert_eq!(m["x_errors_publish_timeout"], 2);
        assert_eq!(m.len(), 3, "{m:?}");
    }
}
