//! Paths into a `result.json` as written: `latency_ms.e2e_a`, `streams.3.push_ms`
//! (dotted, array indices as numbers). The merge of several loaders' records works on
//! the records as written, so that fields the typed reader does not know are carried
//! through, and a histogram's tag is the path of its summary; these are the only
//! lookups of a record's fields by name outside [`crate::result`], and they live
//! here, beside the schema.

use serde_json::{json, Map, Value};

/// `path` as the JSON Pointer serde_json's `Value::pointer` reads: `a.3.b` is `/a/3/b`.
fn pointer(path: &str) -> String {
    path.split('.')
        .map(|part| format!("/{}", part.replace('~', "~0").replace('/', "~1")))
        .collect()
}

/// The value of `v` at `path` (dotted, array indices as numbers).
pub fn at<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    v.pointer(&pointer(path))
}

/// A summary's `clamped` and `negative` counts at `path` (0 where absent).
pub fn summary_counts(v: &Value, path: &str) -> (u64, u64) {
    let n = |field: &str| {
        at(v, &format!("{path}.{field}"))
            .and_then(Value::as_u64)
            .unwrap_or(0)
    };
    (n("clamped"), n("negative"))
}

/// Every numeric leaf of the objects at `path` in `records`, added, written into
/// `out` at `path` (non-numeric leaves keep `out`'s value; nested objects recurse;
/// fields named in `skip` keep `out`'s value).
pub fn sum_numbers(out: &mut Value, records: &[&Value], path: &str, skip: &[&str]) {
    let Some(target) = out.pointer_mut(&pointer(path)) else {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dotted_path_reads_objects_and_array_indices() {
        let v = json!({"streams": [{"push_ms": {"clamped": 2}}, {"a/b~c": 5}]});
        assert_eq!(at(&v, "streams.0.push_ms.clamped"), Some(&json!(2)));
        assert_eq!(at(&v, "streams.1.a/b~c"), Some(&json!(5)));
        assert_eq!(at(&v, "streams.2"), None);
        assert_eq!(at(&v, "streams.x"), None);
        assert_eq!(summary_counts(&v, "streams.0.push_ms"), (2, 0));
    }
}
