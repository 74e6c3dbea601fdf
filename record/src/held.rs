//! The held rule's default thresholds, written once: a cell held its load when it
//! served at least [`SERVED_MIN`] of its demand in the rated window; a ceiling table and
//! a stream cell also call a cell behind when its e2e p99 passed [`P99_MAX_MS`].
//! The scenario's `held.served` overrides the first for a cell; a ceiling search's
//! `--served` and `--p99-max` override both for its cells.

/// The share of the demand a cell must serve in its rated window (`held.served`).
pub const SERVED_MIN: f64 = 0.97;

/// The e2e p99 above which a cell is behind, ms (5 s).
pub const P99_MAX_MS: f64 = 5_000.0;

/// Whether figures are behind the default thresholds: served below [`SERVED_MIN`] or an
/// e2e p99 above [`P99_MAX_MS`].
pub fn behind(served_fraction: f64, e2e_p99_ms: f64) -> bool {
    served_fraction < SERVED_MIN || e2e_p99_ms > P99_MAX_MS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn behind_at_either_threshold() {
        assert!(!behind(0.97, 5_000.0));
        assert!(behind(0.969, 10.0));
        assert!(behind(1.0, 5_000.1));
    }
}
