//! Number formatting shared by tables, comparisons and the HTML page.

/// `—` for an absent figure.
pub const NONE: &str = "—";

/// Latency in ms: one decimal below 10 000, whole ms above.
pub fn ms(v: Option<f64>) -> String {
    match v {
        None => NONE.to_string(),
        Some(x) if x.abs() >= 10_000.0 => thousands(x.round() as i64),
        Some(x) => format!("{x:.1}"),
    }
}

/// A count with thin grouping (`12 000`).
pub fn count(v: Option<u64>) -> String {
    v.map_or_else(|| NONE.to_string(), |x| thousands(x as i64))
}

/// A rate or size with `digits` decimals, grouped when ≥ 10 000.
pub fn num(v: Option<f64>, digits: usize) -> String {
    match v {
        None => NONE.to_string(),
        Some(x) if !x.is_finite() => NONE.to_string(),
        Some(x) if x.abs() >= 10_000.0 => thousands(x.round() as i64),
        Some(x) => format!("{x:.digits$}"),
    }
}

/// A fraction as a percentage with no decimals.
pub fn pct(v: Option<f64>) -> String {
    v.map_or_else(|| NONE.to_string(), |x| format!("{:.0} %", x * 100.0))
}

/// measured ÷ published, `×` suffixed; `—` when either is absent or published is 0.
pub fn ratio(measured: Option<f64>, published: Option<f64>) -> String {
    match (measured, published) {
        (Some(m), Some(p)) if p != 0.0 => format!("{:.2}×", m / p),
        _ => NONE.to_string(),
    }
}

pub fn thousands(x: i64) -> String {
    let s = x.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(' ');
        }
        out.push(c);
    }
    if x < 0 {
        format!("-{out}")
    } else {
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_thousands_and_keeps_small_decimals() {
        assert_eq!(thousands(12_000), "12 000");
        assert_eq!(thousands(-1_234_567), "-1 234 567");
        assert_eq!(ms(Some(55.14)), "55.1");
        assert_eq!(ms(Some(11_863.3)), "11 863");
        assert_eq!(num(None, 1), "—");
        assert_eq!(ratio(Some(2.0), Some(4.0)), "0.50×");
        assert_eq!(ratio(Some(2.0), Some(0.0)), "—");
    }
}
