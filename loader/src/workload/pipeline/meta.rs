//! `produced.meta` of a pipeline cell: the ground truth the checker holds the
//! stream logs against.
//!
//! Format v1 (a superset of the reference harness's, so its rules still apply):
//! header lines start with `#` and carry `key=value` tokens; data lines are
//! `<flow> <prop> <maxSeq>` with maxSeq the highest seq whose publish was acknowledged.

use std::fmt::Write as _;

use crate::measure::outcomes::Outcomes;
use crate::workload::pipeline::plan::Invariants;
use crate::workload::pipeline::seqs::SeqTable;

#[derive(Debug)]
/// The `# stream` header line of one consumer stream.
pub struct StreamHeader {
    pub name: String,
    pub flow: char,
    pub ack_errors: u64,
    /// Consumer reconnects or rebalances of the stream.
    pub reconnects: u64,
}

#[derive(Debug)]
pub struct Meta<'a> {
    pub system: &'a str,
    pub properties: u64,
    pub rate: u64,
    pub base: i64,
    pub drain: &'a str,
    pub delivery: &'a str,
    pub invariants: &'a Invariants,
    pub streams: Vec<StreamHeader>,
    /// Per flow: the acknowledged maxima and the given-up publishes.
    pub flows: Vec<(char, &'a SeqTable, &'a Outcomes)>,
    /// Why this cell's tier may lose acknowledged writes (`loss_allowed=`), if it may.
    pub loss_allowed: Option<String>,
}

impl Meta<'_> {
    pub fn render(&self) -> String {
        let total_ack: u64 = self.streams.iter().map(|s| s.ack_errors).sum();
        let mut s = String::with_capacity(64 + 16 * self.properties as usize);
        let _ = writeln!(s, "# crossbench produced.meta v1");
        let _ = writeln!(
            s,
            "# ackErr={total_ack} base={} system={} properties={} rate={} drain={} delivery={}",
            self.base, self.system, self.properties, self.rate, self.drain, self.delivery
        );
        if let Some(why) = &self.loss_allowed {
            // One token: the header splits on whitespace.
            let why: String = why
                .chars()
                .map(|c| if c.is_whitespace() { '-' } else { c })
                .collect();
            let _ = writeln!(s, "# loss_allowed={why}");
        }
        let i = self.invariants;
        let _ = writeln!(
            s,
            "# invariants deliveries={} lanes={} publish_native={} publish_copied={}",
            i.deliveries_per_sec,
            i.ordered_lanes,
            i.publishes_per_sec_native,
            i.publishes_per_sec_copied
        );
        for st in &self.streams {
            let _ = write!(
                s,
                "# stream name={} flow={} ackErr={}",
                st.name, st.flow, st.ack_errors
            );
            if st.reconnects > 0 {
                let _ = write!(s, " reconnects={}", st.reconnects);
            }
            s.push('\n');
        }
        for (flow, _, outcomes) in &self.flows {
            outcomes.render(*flow, &mut s);
        }
        let mut a = itoa::Buffer::new();
        let mut b = itoa::Buffer::new();
        for (flow, table, _) in &self.flows {
            for prop in 0..table.len() as u64 {
                let m = table.get(prop);
                if m >= self.base {
                    s.push(*flow);
                    s.push(' ');
                    s.push_str(a.format(prop));
                    s.push(' ');
                    s.push_str(b.format(m));
                    s.push('\n');
                }
            }
        }
        s
    }
}
