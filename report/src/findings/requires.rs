//! A finding's preconditions: the conditions under which its question can be asked
//! here at all, checked from the records. A finding whose preconditions fail is **not
//! testable here**, with the condition and the figures that failed it; it is never
//! reported as "does not hold" (a crossing of two curves cannot be seen where one
//! system never reaches its knee, two depths cannot be compared where one arm is
//! idle).
//!
//! ```yaml
//! requires:
//!   - {arm: f1-pgmq-dense, held: false, why: pgmq overloaded at the dense shape}
//!   - {arm: f1-queen-dense, held: true, why: Queen holding the dense shape}
//!   - {arm: f6-queen-100k-partitions, metric: partitions_created_fraction, at_least: 1.0}
//! ```

use serde::{Deserialize, Serialize};

use crate::campaign::{ArmView, CampaignView};
use crate::cell::CellRecord;
use crate::findings::Metric;
use crate::format::pct;

/// One precondition on one arm.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Requirement {
    pub arm: String,
    /// `true`: every repeat of the arm held its load; `false`: none did (the arm is
    /// overloaded, as the question needs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held: Option<bool>,
    /// A figure whose statistic over every repeat of the arm that left a record
    /// (PASS or not: a precondition is about how the arm ran) must lie in
    /// [`at_least`, `at_most`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric: Option<Metric>,
    /// The statistic: the repeats' median (default), or their largest or smallest.
    #[serde(default)]
    pub stat: Stat,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_least: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_most: Option<f64>,
    /// What the condition is for, in words.
    #[serde(default)]
    pub why: String,
}

impl Requirement {
    /// A requirement that says something: `held`, or a `metric` with a bound.
    pub fn validate(&self) -> Result<(), String> {
        match (&self.held, &self.metric, self.at_least, self.at_most) {
            (None, None, _, _) => Err(format!(
                "requires arm `{}`: give `held: true|false` or a `metric` with `at_least`/`at_most`",
                self.arm
            )),
            (_, Some(m), None, None) => Err(format!(
                "requires arm `{}`: metric `{}` needs `at_least` or `at_most`",
                self.arm,
                m.name()
            )),
            (_, None, Some(_), _) | (_, None, _, Some(_)) => Err(format!(
                "requires arm `{}`: `at_least`/`at_most` need a `metric`",
                self.arm
            )),
            _ => Ok(()),
        }
    }

    /// The condition in words.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        match self.held {
            Some(true) => parts.push("every repeat held its load".to_string()),
            Some(false) => parts.push("no repeat held its load (overloaded)".to_string()),
            None => {}
        }
        if let Some(m) = self.metric {
            let mut b = Vec::new();
            if let Some(x) = self.at_least {
                b.push(format!("≥ {}", figure(m, x)));
            }
            if let Some(x) = self.at_most {
                b.push(format!("≤ {}", figure(m, x)));
            }
            parts.push(format!(
                "{} {} {}",
                self.stat.name(),
                m.name(),
                b.join(" and ")
            ));
        }
        let what = format!("`{}`: {}", self.arm, parts.join("; "));
        if self.why.trim().is_empty() {
            what
        } else {
            format!("{what} ({})", self.why.trim())
        }
    }
}

/// Which statistic of the repeats a precondition on a metric reads.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Stat {
    #[default]
    Median,
    Max,
    Min,
}

impl Stat {
    fn name(self) -> &'static str {
        match self {
            Stat::Median => "median",
            Stat::Max => "largest",
            Stat::Min => "smallest",
        }
    }

    fn of(self, v: &[f64]) -> Option<f64> {
        match self {
            Stat::Median => crate::stats::median(v),
            Stat::Max => v.iter().copied().reduce(f64::max),
            Stat::Min => v.iter().copied().reduce(f64::min),
        }
    }
}

/// A figure as the page prints it: fractions as percentages.
fn figure(m: Metric, x: f64) -> String {
    match m {
        Metric::WindowServedFraction | Metric::PartitionsCreatedFraction => pct(Some(x)),
        Metric::CheckerFailed => format!("{x:.0}"),
        Metric::PartitionsCreatedPerSecRated => format!("{x:.2}"),
        _ => format!("{x:.3}"),
    }
}

/// How one precondition came out.
#[derive(Debug, Clone, PartialEq)]
pub struct RequirementResult {
    pub met: bool,
    /// The condition, and the figures it was judged on.
    pub text: String,
}

/// Check `r` on the campaign `c`; `Err` when the arm is not in it.
pub fn evaluate(c: &CampaignView, r: &Requirement) -> Result<RequirementResult, String> {
    let a: &ArmView = c.arm(&r.arm).ok_or_else(|| {
        format!(
            "requires arm `{}`, which campaign {} does not have",
            r.arm, c.name
        )
    })?;
    let mut met = true;
    let mut figures = Vec::new();
    if let Some(want) = r.held {
        let held: Vec<bool> = a.cells.iter().map(CellRecord::held).collect();
        let k = held.iter().filter(|h| **h).count();
        let ok = !held.is_empty()
            && match want {
                true => k == held.len(),
                false => k == 0,
            };
        met &= ok;
        let served: Vec<String> = a
            .cells
            .iter()
            .map(|c| pct(Some(c.served_in_window())))
            .collect();
        figures.push(format!(
            "held in {k} of {} repeats (served {})",
            held.len(),
            if served.is_empty() {
                "—".to_string()
            } else {
                served.join(", ")
            }
        ));
    }
    if let Some(m) = r.metric {
        let vals: Vec<f64> = a.cells.iter().filter_map(|c| m.read(c)).collect();
        match r.stat.of(&vals) {
            Some(x) => {
                let ok = r.at_least.is_none_or(|b| x >= b) && r.at_most.is_none_or(|b| x <= b);
                met &= ok;
                figures.push(format!(
                    "{} {} {} over {} repeats ({})",
                    r.stat.name(),
                    m.name(),
                    figure(m, x),
                    vals.len(),
                    vals.iter()
                        .map(|v| figure(m, *v))
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
            None => {
                met = false;
                figures.push(format!("no repeat gives {}", m.name()));
            }
        }
    }
    Ok(RequirementResult {
        met,
        text: format!("{}: {}", r.describe(), figures.join("; ")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_requirement_must_say_something() {
        let r = |held, metric, at_least| Requirement {
            arm: "a".into(),
            held,
            metric,
            stat: Stat::Median,
            at_least,
            at_most: None,
            why: String::new(),
        };
        assert!(r(None, None, None).validate().is_err());
        assert!(r(None, Some(Metric::E2eP50Ms), None).validate().is_err());
        assert!(r(None, None, Some(1.0)).validate().is_err());
        assert!(r(Some(true), None, None).validate().is_ok());
        assert!(r(None, Some(Metric::E2eP50Ms), Some(1.0))
            .validate()
            .is_ok());
        assert_eq!(
            r(Some(false), None, None).describe(),
            "`a`: no repeat held its load (overloaded)"
        );
    }
}
