//! The merged `produced.meta`: the union of the loaders' ground truths. Every key has
//! one producer, so the data lines of two loaders never name the same (flow, key):
//! if they do, the loaders were not given the same loader count and the merge stops.
//! Ack errors and reconnects add up per stream, given-up publishes are kept, and the
//! drain is the worst of the loaders' (a tail cut short anywhere is not judged).
//! A `# fleet` line says how many loaders, the topology, and whether their clocks are
//! trusted (the checker reports order violations at a hand-off apart when not).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

use checker::{DrainOutcome, Produced};

use crate::cell::merge::MergeError;

/// One loader's `produced.meta`, parsed.
#[derive(Debug)]
pub struct LoaderMeta {
    pub loader: u32,
    pub path: PathBuf,
    pub produced: Produced,
}

impl LoaderMeta {
    /// The loader's namespace prefix (partitioned cells), from its `# fleet` line.
    pub fn namespace(&self) -> Option<&str> {
        self.produced
            .header
            .get("fleet.namespace")
            .map(String::as_str)
            .filter(|n| !n.is_empty())
    }

    /// The cell's name of one of this loader's streams (its namespace removed).
    pub fn canonical(&self, name: &str) -> String {
        match self.namespace() {
            Some(ns) => name.replacen(ns, "", 1),
            None => name.to_string(),
        }
    }
}

fn worst_drain(a: Option<DrainOutcome>, b: Option<DrainOutcome>) -> Option<DrainOutcome> {
    let rank = |d: Option<DrainOutcome>| match d {
        Some(DrainOutcome::CaughtUp) => 0,
        Some(DrainOutcome::Grace) => 1,
        Some(DrainOutcome::CutShort) => 2,
        None => 3,
    };
    if rank(b) > rank(a) {
        b
    } else {
        a
    }
}

/// Render the merged `produced.meta` of `metas` (loader 0 first).
pub fn merge(
    metas: &[LoaderMeta],
    topology: &str,
    clocks_trusted: bool,
) -> Result<String, MergeError> {
    let first = metas
        .first()
        .ok_or_else(|| MergeError::Input("no loaders".into()))?;
    let h = &first.produced.header;
    let get = |k: &str| h.get(k).cloned().unwrap_or_default();
    let mut total_ack = 0u64;
    let mut drain = Some(DrainOutcome::CaughtUp);
    for m in metas {
        total_ack += m.produced.total_ack_errors;
        drain = worst_drain(drain, m.produced.drain);
        if m.produced.base != first.produced.base {
            return Err(MergeError::Bad {
                path: m.path.clone(),
                message: format!(
                    "base seq {} differs from loader {}'s {}",
                    m.produced.base, first.loader, first.produced.base
                ),
            });
        }
    }
    let mut s = String::new();
    let _ = writeln!(s, "# crossbench produced.meta v1");
    let _ = writeln!(
        s,
        "# ackErr={total_ack} base={} system={} properties={} rate={} drain={} delivery={}",
        first.produced.base,
        get("system"),
        get("properties"),
        get("rate"),
        drain.map_or("cut-short", |d| d.as_str()),
        first.produced.delivery.clone().unwrap_or_default()
    );
    if let Some(why) = h.get("loss_allowed") {
        let _ = writeln!(s, "# loss_allowed={why}");
    }
    let inv: Vec<String> = h
        .iter()
        .filter_map(|(k, v)| k.strip_prefix("invariants.").map(|k| format!("{k}={v}")))
        .collect();
    if !inv.is_empty() {
        let _ = writeln!(s, "# invariants {}", inv.join(" "));
    }
    let _ = writeln!(
        s,
        "# fleet loaders={} topology={topology} clocks={} merged=true",
        metas.len(),
        if clocks_trusted {
            "trusted"
        } else {
            "untrusted"
        }
    );
    // Streams in loader 0's order; ack errors and reconnects add up.
    let mut ack: BTreeMap<String, u64> = BTreeMap::new();
    let mut rec: BTreeMap<String, u64> = BTreeMap::new();
    for m in metas {
        for (name, n) in &m.produced.stream_ack_errors {
            *ack.entry(m.canonical(name)).or_default() += n;
        }
        for (name, n) in &m.produced.stream_reconnects {
            *rec.entry(m.canonical(name)).or_default() += n;
        }
    }
    for st in &first.produced.streams {
        let name = first.canonical(&st.name);
        let _ = write!(
            s,
            "# stream name={name} flow={} ackErr={}",
            st.flow,
            ack.get(&name).copied().unwrap_or(0)
        );
        let r = rec.get(&name).copied().unwrap_or(0);
        if r > 0 {
            let _ = write!(s, " reconnects={r}");
        }
        s.push('\n');
    }
    for m in metas {
        for i in &m.produced.indeterminate {
            let _ = writeln!(
                s,
                "# indeterminate flow={} prop={} seq={} to={}",
                i.flow, i.prop, i.seq, i.to
            );
        }
        for f in &m.produced.failed {
            let _ = writeln!(
                s,
                "# failed flow={} prop={} seq={} to={}",
                f.flow, f.prop, f.seq, f.to
            );
        }
    }
    // Data lines: the union, each (flow, key) from its one producer.
    let mut data: BTreeMap<(String, u64), (i64, u32)> = BTreeMap::new();
    for m in metas {
        for (flow, pf) in &m.produced.flows {
            for &(p, max) in &pf.max_seq {
                if let Some((_, other)) = data.insert((flow.clone(), p), (max, m.loader)) {
                    return Err(MergeError::Input(format!(
                        "loaders {other} and {} both produced flow {flow} key {p}: their shares overlap (was every loader given the same --loader-count?)",
                        m.loader
                    )));
                }
            }
        }
    }
    for ((flow, p), (max, _)) in &data {
        let _ = writeln!(s, "{flow} {p} {max}");
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(loader: u32, text: &str) -> LoaderMeta {
        let path = PathBuf::from(format!("l{loader}/produced.meta"));
        LoaderMeta {
            loader,
            produced: checker::parse_produced(text, &path).unwrap(),
            path,
        }
    }

    const HEAD: &str = "# crossbench produced.meta v1\n# fleet loaders=2 index={J} topology=partitioned namespace=l{J}-\n# ackErr={ACK} base=0 system=pgmq properties=4 rate=10 drain={DRAIN} delivery=exactly-once\n# invariants deliveries=60 lanes=8\n# stream name=l{J}-t_g flow=A ackErr={ACK}{REC}\n";

    fn head(j: u32, ack: u64, drain: &str, rec: &str) -> String {
        HEAD.replace("{J}", &j.to_string())
            .replace("{ACK}", &ack.to_string())
            .replace("{DRAIN}", drain)
            .replace("{REC}", rec)
    }

    #[test]
    fn the_union_of_two_loaders() {
        let a = meta(
            0,
            &(head(0, 1, "caught-up", " reconnects=2")
                + "# failed flow=A prop=0 seq=3\nA 0 5\nA 2 4\n"),
        );
        let b = meta(1, &(head(1, 0, "grace", "") + "A 1 7\nA 3 2\n"));
        let text = merge(&[a, b], "partitioned", true).unwrap();
        let back = checker::parse_produced(&text, &PathBuf::from("m")).unwrap();
        assert_eq!(back.total_ack_errors, 1);
        assert_eq!(back.drain, Some(DrainOutcome::Grace));
        assert_eq!(back.streams.len(), 1);
        assert_eq!(back.streams[0].name, "t_g");
        assert_eq!(back.stream_reconnects["t_g"], 2);
        assert_eq!(
            back.flows["A"].max_seq,
            vec![(0, 5), (1, 7), (2, 4), (3, 2)]
        );
        assert_eq!(back.failed.len(), 1);
        assert_eq!(back.header["fleet.clocks"], "trusted");
        assert_eq!(back.header["invariants.deliveries"], "60");
    }

    #[test]
    fn overlapping_shares_stop_the_merge() {
        let a = meta(0, &(head(0, 0, "caught-up", "") + "A 0 5\n"));
        let b = meta(1, &(head(1, 0, "caught-up", "") + "A 0 5\n"));
        let e = merge(&[a, b], "shared", false).unwrap_err();
        assert!(e.to_string().contains("both produced flow A key 0"), "{e}");
    }
}
