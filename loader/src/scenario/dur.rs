//! Durations in scenario files: `250ms`, `2s`, `1m`, or a bare number of seconds;
//! `auto` where a field can be left to the system (the drain's grace).

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A duration written as `250ms`, `2s`, `1m`, or a bare number of seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Dur(pub Duration);

impl Dur {
    pub fn secs_f64(&self) -> f64 {
        self.0.as_secs_f64()
    }
}

impl fmt::Display for Dur {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let us = self.0.as_micros();
        if us.is_multiple_of(1_000_000) {
            write!(f, "{}s", us / 1_000_000)
        } else if us.is_multiple_of(1000) {
            write!(f, "{}ms", us / 1000)
        } else {
            write!(f, "{us}us")
        }
    }
}

impl Serialize for Dur {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        adapters::duration_text::deserialize(d).map(Dur)
    }
}

pub(crate) fn de_auto_dur<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Dur>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        N(f64),
        S(String),
    }
    match Raw::deserialize(d)? {
        Raw::S(s) if s == "auto" => Ok(None),
        Raw::S(s) => adapters::duration_text::parse_duration(&s)
            .map(|x| Some(Dur(x)))
            .map_err(serde::de::Error::custom),
        Raw::N(n) if n.is_finite() && n >= 0.0 => Duration::try_from_secs_f64(n)
            .map(|d| Some(Dur(d)))
            .map_err(|_| serde::de::Error::custom(format!("{n} seconds is too long a duration"))),
        Raw::N(n) => Err(serde::de::Error::custom(format!("{n} is not a duration"))),
    }
}

pub(crate) fn ser_auto_dur<S: Serializer>(v: &Option<Dur>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        None => s.serialize_str("auto"),
        Some(d) => d.serialize(s),
    }
}
