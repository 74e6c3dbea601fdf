//! The plan of a run: rates per flow, the streams, lane budgets, and the derived
//! invariants every reviewer checks first (SPEC.md §2).

use serde::Serialize;

use crate::scenario::Scenario;
use crate::workload::pipeline::topology::{
    pipeline_streams, streams_per_flow, topics_per_flow, Flow, StreamDef,
};

/// Workload-derived figures, the same for every system.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Invariants {
    /// 6R: every ingress event reaches six consumer streams.
    pub deliveries_per_sec: u64,
    /// Σ over the twelve stages of ⌈flow rate × mean work⌉ (Little's law).
    pub ordered_lanes: u64,
    /// 2R: physical publishes per second with native fan-out (ingress + one derived).
    pub publishes_per_sec_native: u64,
    /// 6R: physical publishes per second when every group gets its own copy.
    pub publishes_per_sec_copied: u64,
}

/// One stage of the plan.
#[derive(Debug, Clone)]
pub struct StagePlan {
    pub stream: StreamDef,
    /// Offered events per second into this stream.
    pub rate: f64,
    /// Ordered lanes this stage needs by Little's law.
    pub lanes_needed: u64,
    /// Work slots shared by every batch of the stage (max(4, ⌈lanes × headroom⌉)).
    pub lane_budget: u64,
}

#[derive(Debug, Clone)]
pub struct Plan {
    pub rate_a: u64,
    pub rate_b: u64,
    pub stages: Vec<StagePlan>,
    pub invariants: Invariants,
    /// Publisher shards per flow.
    pub shards: u64,
    /// Physical lanes per topic (P when the scenario says 0).
    pub lanes: u64,
}

impl Plan {
    pub fn new(s: &Scenario) -> Plan {
        let rate_a = s.rate / 2;
        let rate_b = s.rate - rate_a;
        let streams = pipeline_streams(&s.prefix);
        let per_flow = streams_per_flow(&streams);
        let topics_per_flow = topics_per_flow(&streams);
        let headroom = if s.lane_headroom <= 0.0 {
            1.0
        } else {
            s.lane_headroom
        };
        let stages: Vec<StagePlan> = streams
            .into_iter()
            .map(|st| {
                let rate = match st.flow {
                    Flow::A => rate_a,
                    Flow::B => rate_b,
                } as f64;
                let need = rate * st.avg_work_ms() / 1000.0;
                StagePlan {
                    lanes_needed: need.ceil() as u64,
                    lane_budget: ((need * headroom).ceil() as u64).max(4),
                    rate,
                    stream: st,
                }
            })
            .collect();
        let invariants = Invariants {
            deliveries_per_sec: per_flow * s.rate,
            ordered_lanes: stages.iter().map(|x| x.lanes_needed).sum(),
            publishes_per_sec_native: topics_per_flow * s.rate,
            publishes_per_sec_copied: per_flow * s.rate,
        };
        Plan {
            rate_a,
            rate_b,
            stages,
            invariants,
            shards: s.push_shards.clamp(1, s.properties.max(1)),
            lanes: if s.lanes == 0 { s.properties } else { s.lanes },
        }
    }

    /// Consumer streams one ingress event reaches (6).
    pub fn streams_per_flow(&self) -> u64 {
        (self.stages.len() / Flow::ALL.len()) as u64
    }

    /// The rate of `flow`.
    pub fn rate(&self, flow: Flow) -> u64 {
        match flow {
            Flow::A => self.rate_a,
            Flow::B => self.rate_b,
        }
    }

    pub fn lane_budget_total(&self) -> u64 {
        self.stages.iter().map(|s| s.lane_budget).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::parse;

    fn plan(rate: u64) -> Plan {
        let s = parse(
            &format!("name: t\nsystem: mem\nrate: {rate}\nproperties: 1000\nduration: 10s\n"),
            "t",
            &[],
        )
        .unwrap();
        Plan::new(&s)
    }

    #[test]
    fn invariants_match_the_reference() {
        let p = plan(25_000);
        assert_eq!(p.invariants.deliveries_per_sec, 150_000);
        assert_eq!(p.invariants.ordered_lanes, 4063);
        assert_eq!(p.invariants.publishes_per_sec_native, 50_000);
        assert_eq!(p.invariants.publishes_per_sec_copied, 150_000);
        let p = plan(5000);
        assert_eq!(p.invariants.ordered_lanes, 813);
        assert_eq!(p.stages[0].lanes_needed, 38);
        assert_eq!(p.stages[2].lanes_needed, 75);
        for (r, l) in [(2000, 325), (12_000, 1950), (6000, 975)] {
            assert_eq!(plan(r).invariants.ordered_lanes, l, "R={r}");
        }
    }

    #[test]
    fn lane_budget_matches_the_reference() {
        // R=2000, headroom 1.5: cm-db 23, cm-cal 15, each OTA 45 -> 488.
        let p = plan(2000);
        assert_eq!(p.stages[0].lane_budget, 23);
        assert_eq!(p.stages[1].lane_budget, 15);
        assert_eq!(p.stages[2].lane_budget, 45);
        assert_eq!(p.lane_budget_total(), 488);
    }
}
