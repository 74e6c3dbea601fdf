//! Durations as scenarios write them: text such as `250ms`, `2s`, `1m`, `500us`, or a
//! bare number of seconds. One parser and one serde form for every options section
//! (`#[serde(with = "crate::duration_text")]`), so a duration reads the same wherever
//! it appears and is written back in a form the parser takes.

use std::time::Duration;

use serde::{Deserialize, Deserializer, Serializer};

/// Parse "250ms", "2s", "1m", "500us" (a bare number is seconds).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let value: f64 = num
        .parse()
        .map_err(|_| format!("{text:?} is not a duration; write e.g. 250ms, 2s, 1m"))?;
    let secs = match unit.trim() {
        "" | "s" => value,
        "ms" => value / 1e3,
        "us" | "µs" => value / 1e6,
        "ns" => value / 1e9,
        "m" | "min" => value * 60.0,
        "h" => value * 3600.0,
        other => {
            return Err(format!(
                "{text:?}: unknown unit {other:?}; use ns, us, ms, s, m or h"
            ))
        }
    };
    if !secs.is_finite() || secs < 0.0 {
        return Err(format!("{text:?} must be a non-negative duration"));
    }
    Duration::try_from_secs_f64(secs).map_err(|_| format!("{text:?} is too long a duration"))
}

/// Written as whole milliseconds when exact ("250ms"), else microseconds ("1500us").
pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    let ms = d.as_millis();
    if Duration::from_millis(ms as u64) == *d {
        s.serialize_str(&format!("{ms}ms"))
    } else {
        s.serialize_str(&format!("{}us", d.as_micros()))
    }
}

/// Text (see [`parse_duration`]) or a non-negative number of seconds.
pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Secs(f64),
        Text(String),
    }
    match Raw::deserialize(d)? {
        Raw::Secs(x) if x.is_finite() && x >= 0.0 => Duration::try_from_secs_f64(x)
            .map_err(|_| serde::de::Error::custom(format!("{x} seconds is too long a duration"))),
        Raw::Secs(x) => Err(serde::de::Error::custom(format!(
            "{x} is not a non-negative number of seconds"
        ))),
        Raw::Text(t) => parse_duration(&t).map_err(serde::de::Error::custom),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Serialize, serde::Deserialize)]
    struct T {
        #[serde(with = "crate::duration_text")]
        d: Duration,
    }

    #[test]
    fn text_numbers_and_round_trips() {
        for (text, want) in [
            (r#""250ms""#, Duration::from_millis(250)),
            (r#""2s""#, Duration::from_secs(2)),
            (r#""1m""#, Duration::from_secs(60)),
            (r#""500us""#, Duration::from_micros(500)),
            ("1.5", Duration::from_millis(1500)),
        ] {
            let t: T = serde_json::from_str(&format!(r#"{{"d":{text}}}"#)).unwrap();
            assert_eq!(t.d, want, "{text}");
            let back: T = serde_json::from_str(&serde_json::to_string(&t).unwrap()).unwrap();
            assert_eq!(back.d, want, "round trip of {text}");
        }
        assert!(serde_json::from_str::<T>(r#"{"d":"2 weeks"}"#).is_err());
        assert!(serde_json::from_str::<T>(r#"{"d":-1}"#).is_err());
        assert!(parse_duration("5x").unwrap_err().contains("unknown unit"));
    }
}
