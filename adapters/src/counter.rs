//! Counters shared between tasks, and their snapshot for the record.
//!
//! A [`Counter`] is a relaxed atomic count that serialises as its value, so a struct
//! of counters derives `Serialize` and its snapshot for `result.json`
//! (`broker_stats`) comes from [`snapshot`] instead of a hand-written list of keys.
//! A [`CounterMap`] counts by a key known only at run time (errors by operation and
//! class) and serialises as a map, so its entries land under the field's name.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
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

    /// Record a value measured once (a size at setup) rather than counted.
    pub fn set(&self, n: u64) {
        self.0.store(n, Ordering::Relaxed);
    }
}

impl Serialize for Counter {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(self.get())
    }
}

/// Counts by a key made at run time (`<op>_<class>`), bumped from any task. In a
/// snapshot its entries appear as `<prefix><field>_<key>`, and only once counted.
#[derive(Debug, Default)]
pub struct CounterMap(Mutex<BTreeMap<String, u64>>);

impl CounterMap {
    pub fn add(&self, key: impl Into<String>, n: u64) {
        *self.0.lock().entry(key.into()).or_default() += n;
    }

    pub fn inc(&self, key: impl Into<String>) {
        self.add(key, 1);
    }

    pub fn get(&self, key: &str) -> u64 {
        self.0.lock().get(key).copied().unwrap_or(0)
    }
}

impl Serialize for CounterMap {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.lock().serialize(s)
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

    #[derive(Default, Serialize)]
    struct WithMap {
        sent: Counter,
        errors: CounterMap,
        /// Known only after setup: absent until then.
        lanes: Option<u64>,
    }

    #[test]
    fn a_counter_map_adds_its_keys_and_none_is_left_out() {
        let s = WithMap::default();
        assert_eq!(
            snapshot("y_", &s).into_keys().collect::<Vec<_>>(),
            ["y_sent"]
        );
        s.errors.inc("send_timeout");
        s.errors.add("send_timeout", 2);
        s.sent.set(7);
        let s = WithMap {
            lanes: Some(4),
            ..s
        };
        let m = snapshot("y_", &s);
        assert_eq!(m["y_errors_send_timeout"], 3);
        assert_eq!(m["y_sent"], 7);
        assert_eq!(m["y_lanes"], 4);
        assert_eq!(m.len(), 3, "{m:?}");
        assert_eq!(s.errors.get("send_timeout"), 3);
    }
}
