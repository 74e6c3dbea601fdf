//! The publishes that did not end acknowledged, by what is known of them (Jepsen's
//! taxonomy): **failed** (the system refused them, or the harness dropped them unsent at
//! their deadline: they certainly did not land) and **indeterminate** (timed out or lost
//! their connection before an answer: they may have landed). `produced.meta` lists both
//! as seq ranges (`# failed …`, `# indeterminate …`), so the checker can tell an aborted
//! read from a recovered write and neither from a loss.
//!
//! Only give-ups touch this table, so its cost is nothing in fair weather. During an
//! outage a key's give-ups are consecutive seqs, which merge into one range: the table
//! grows with the number of outages per key, not with the number of messages.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Mutex;

/// What is known of a publish that was given up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GiveUp {
    /// Certainly not applied: refused by the system, or never sent.
    Failed,
    /// Maybe applied: an attempt timed out, lost its connection or was cut off.
    Indeterminate,
}

impl GiveUp {
    /// The `produced.meta` word for the range.
    pub fn word(self) -> &'static str {
        match self {
            GiveUp::Failed => "failed",
            GiveUp::Indeterminate => "indeterminate",
        }
    }
}

/// A key's given-up seqs: `(from, to, kind)` ranges in give-up order.
type Ranges = Vec<(i64, i64, GiveUp)>;

/// Given-up seq ranges per key of one flow.
#[derive(Debug, Default)]
pub struct Outcomes {
    ranges: Mutex<HashMap<u64, Ranges>>,
}

impl Outcomes {
    /// Record seqs `from..=to` of `key` as given up with `kind`.
    pub fn give_up(&self, key: u64, from: i64, to: i64, kind: GiveUp) {
        if to < from {
            return;
        }
        let mut m = self.ranges.lock().expect("outcomes lock");
        let v = m.entry(key).or_default();
        match v.last_mut() {
            Some(last) if last.2 == kind && last.1 + 1 == from => last.1 = to,
            _ => v.push((from, to, kind)),
        }
    }

    /// Seqs given up, by kind: (failed, indeterminate).
    pub fn counts(&self) -> (u64, u64) {
        let m = self.ranges.lock().expect("outcomes lock");
        let mut c = (0, 0);
        for &(a, b, k) in m.values().flatten() {
            let n = (b - a + 1) as u64;
            match k {
                GiveUp::Failed => c.0 += n,
                GiveUp::Indeterminate => c.1 += n,
            }
        }
        c
    }

    /// Append the `# failed` / `# indeterminate` lines of flow `flow`, by key.
    pub fn render(&self, flow: char, out: &mut String) {
        let m = self.ranges.lock().expect("outcomes lock");
        let mut keys: Vec<&u64> = m.keys().collect();
        keys.sort_unstable();
        for k in keys {
            for &(a, b, kind) in &m[k] {
                let _ = write!(out, "# {} flow={flow} prop={k} seq={a}", kind.word());
                if b != a {
                    let _ = write!(out, " to={b}");
                }
                out.push('\n');
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consecutive_give_ups_of_a_kind_merge_and_render_sorted() {
        let o = Outcomes::default();
        o.give_up(7, 3, 3, GiveUp::Failed);
        o.give_up(7, 4, 6, GiveUp::Failed);
        o.give_up(7, 7, 7, GiveUp::Indeterminate);
        o.give_up(2, 10, 10, GiveUp::Indeterminate);
        o.give_up(7, 9, 8, GiveUp::Failed); // empty range: ignored
        let mut s = String::new();
        o.render('A', &mut s);
        assert_eq!(
            s,
            "# indeterminate flow=A prop=2 seq=10\n\
             # failed flow=A prop=7 seq=3 to=6\n\
             # indeterminate flow=A prop=7 seq=7\n"
        );
        assert_eq!(o.counts(), (4, 2));
    }
}
