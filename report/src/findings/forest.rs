//! The findings as a forest plot: each ratio check of each finding in each sitting
//! that holds its arms, one row, coloured by the finding's verdict in that sitting
//! (a check whose preconditions failed is drawn "not judged"), the side where the
//! claim holds shaded, the seed's ratio as a cross. Failure-count checks have no
//! ratio and are not drawn.

use super::sittings::Sitting;
use super::{judge, Check, Direction, Finding, Judgement};
use crate::plot::forest::{Row, Side, Verdict, Words};

/// The legend's words for a findings forest.
pub const WORDS: Words = [
    "holds",
    "does not hold",
    "inconclusive",
    "not judged: a precondition failed",
];

/// One row per ratio check per sitting that holds the finding's arms.
pub fn rows(sittings: &[Sitting], findings: &[Finding]) -> Result<Vec<Row>, String> {
    let mut out = Vec::new();
    for f in findings {
        let ratios = f
            .checks
            .iter()
            .filter(|k| matches!(k, Check::Ratio { .. }))
            .count();
        for st in sittings.iter().filter(|st| st.holds_arms(f)) {
            let r = judge(&st.view, f)?;
            let mut k_index = 0;
            for (k, res) in f.checks.iter().zip(&r.checks) {
                let Check::Ratio {
                    expect,
                    tolerance,
                    published_ratio,
                    ..
                } = k
                else {
                    continue;
                };
                k_index += 1;
                let Some(i) = res.ratio else {
                    continue;
                };
                let verdict = match (r.judgement, res.judgement) {
                    (Judgement::NotTestable, _) => Verdict::NotJudged,
                    (_, Judgement::Holds) => Verdict::Holds,
                    (_, Judgement::DoesNotHold) => Verdict::DoesNotHold,
                    (_, Judgement::Inconclusive) => Verdict::Inconclusive,
                    _ => Verdict::NotJudged,
                };
                let check = if ratios > 1 {
                    format!("{} #{k_index}", f.id)
                } else {
                    f.id.clone()
                };
                out.push(Row {
                    label: format!("{check} · {}", st.label),
                    estimate: i.estimate,
                    low: i.low,
                    high: i.high,
                    side: match expect {
                        Direction::Below => Side::Below,
                        Direction::Above => Side::Above,
                        Direction::Near => Side::Within(1.0 - tolerance, 1.0 + tolerance),
                    },
                    published: *published_ratio,
                    verdict,
                });
            }
        }
    }
    Ok(out)
}
