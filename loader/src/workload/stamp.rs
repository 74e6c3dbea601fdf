//! The event stamp: what every message carries, byte-compatible with the reference.
//!
//! `{"prop":N,"flow":"X","seq":N,"ts":N` then, in a cell of several loaders,
//! `,"loader":J` (the loader that produced it), then, for flow-B ingress only,
//! `,"rates":[...]`, then `}`. `ts` is the *scheduled* instant in µs since the Unix
//! epoch, so every latency measured from it is corrected for coordinated omission.

use serde::Deserialize;

/// The four fields every message carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    pub prop: u64,
    pub flow: u8,
    pub seq: i64,
    /// Scheduled instant, µs since the Unix epoch.
    pub ts: i64,
    /// The loader that produced it (cells of several loaders only).
    pub loader: Option<u32>,
}

/// A payload that does not carry a stamp.
#[derive(Debug, thiserror::Error)]
#[error("payload is not a crossbench stamp: {0}")]
pub struct StampError(pub String);

impl Stamp {
    /// Append the stamp, optional padding, and the closing brace to `out`.
    pub fn encode_into(&self, padding: Option<&[u8]>, out: &mut Vec<u8>) {
        let mut buf = itoa::Buffer::new();
        out.extend_from_slice(b"{\"prop\":");
        out.extend_from_slice(buf.format(self.prop).as_bytes());
        out.extend_from_slice(b",\"flow\":\"");
        out.push(self.flow);
        out.extend_from_slice(b"\",\"seq\":");
        out.extend_from_slice(buf.format(self.seq).as_bytes());
        out.extend_from_slice(b",\"ts\":");
        out.extend_from_slice(buf.format(self.ts).as_bytes());
        if let Some(l) = self.loader {
            out.extend_from_slice(b",\"loader\":");
            out.extend_from_slice(buf.format(l).as_bytes());
        }
        if let Some(p) = padding {
            out.extend_from_slice(b",\"rates\":");
            out.extend_from_slice(p);
        }
        out.push(b'}');
    }

    pub fn encode(&self, padding: Option<&[u8]>) -> Vec<u8> {
        let mut v = Vec::with_capacity(64 + padding.map_or(0, |p| p.len() + 10));
        self.encode_into(padding, &mut v);
        v
    }

    /// Decode a payload. Returns the stamp and whether the slow path was needed
    /// (the system re-serialised the document, as jsonb does).
    pub fn decode(payload: &[u8]) -> Result<(Stamp, bool), StampError> {
        if let Some(s) = Self::decode_fast(payload) {
            return Ok((s, false));
        }
        Self::decode_slow(payload).map(|s| (s, true))
    }

    fn decode_fast(p: &[u8]) -> Option<Stamp> {
        let rest = p.strip_prefix(b"{\"prop\":")?;
        let (prop, rest) = parse_int(rest)?;
        let rest = rest.strip_prefix(b",\"flow\":\"")?;
        let (&flow, rest) = rest.split_first()?;
        let rest = rest.strip_prefix(b"\",\"seq\":")?;
        let (seq, rest) = parse_int(rest)?;
        let rest = rest.strip_prefix(b",\"ts\":")?;
        let (ts, rest) = parse_int(rest)?;
        let (loader, rest) = match rest.strip_prefix(b",\"loader\":") {
            Some(r) => {
                let (l, r) = parse_int(r)?;
                (Some(u32::try_from(l).ok()?), r)
            }
            None => (None, rest),
        };
        match rest.first() {
            Some(b'}') | Some(b',') => {}
            _ => return None,
        }
        if prop < 0 {
            return None;
        }
        Some(Stamp {
            prop: prop as u64,
            flow,
            seq,
            ts,
            loader,
        })
    }

    fn decode_slow(p: &[u8]) -> Result<Stamp, StampError> {
        #[derive(Deserialize)]
        struct Doc {
            prop: u64,
            flow: String,
            seq: i64,
            ts: i64,
            #[serde(default)]
            loader: Option<u32>,
        }
        let d: Doc = serde_json::from_slice(p).map_err(|e| StampError(e.to_string()))?;
        let flow = *d
            .flow
            .as_bytes()
            .first()
            .ok_or_else(|| StampError("empty flow".into()))?;
        if d.flow.len() != 1 {
            return Err(StampError(format!("flow {:?} is not one letter", d.flow)));
        }
        Ok(Stamp {
            prop: d.prop,
            flow,
            seq: d.seq,
            ts: d.ts,
            loader: d.loader,
        })
    }
}

fn parse_int(b: &[u8]) -> Option<(i64, &[u8])> {
    let (neg, digits) = match b.first() {
        Some(b'-') => (true, &b[1..]),
        _ => (false, b),
    };
    let mut v: i64 = 0;
    let mut n = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            break;
        }
        // Up to 18 digits cannot overflow an i64: checked only from the 19th.
        v = if n < 18 {
            v * 10 + i64::from(c - b'0')
        } else {
            v.checked_mul(10)?.checked_add(i64::from(c - b'0'))?
        };
        n += 1;
    }
    if n == 0 {
        return None;
    }
    Some((if neg { -v } else { v }, &digits[n..]))
}

/// The flow-B `rates` padding: a JSON array of day objects at least `target` bytes
/// long, built exactly as the reference builds it (so payload sizes compare).
pub fn rates_padding(target: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(target + 64);
    out.push(b'[');
    let mut day: u64 = 1;
    let mut estimate = 0usize;
    let mut first = true;
    while estimate < target {
        let month = 1 + (day / 28) % 12;
        let dom = 1 + day % 28;
        let p = 100.0 + (day % 400) as f64;
        let a = day % 12;
        if !first {
            out.push(b',');
        }
        first = false;
        out.extend_from_slice(
            format!("{{\"d\":\"2026-{month:02}-{dom:02}\",\"p\":{p:.1},\"a\":{a}}}").as_bytes(),
        );
        estimate += 36;
        day += 1;
    }
    out.push(b']');
    out
}

/// The ordering key of property `p`: `p<N>`, identical for every system.
pub fn key_of(prop: u64) -> String {
    let mut s = String::with_capacity(8);
    s.push('p');
    s.push_str(itoa::Buffer::new().format(prop));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_fast_path_with_padding() {
        let pad = rates_padding(2048);
        let s = Stamp {
            prop: 17,
            flow: b'B',
            seq: 42,
            ts: 1_700_000_000_000_000,
            loader: None,
        };
        let bytes = s.encode(Some(&pad));
        assert!(bytes.len() >= 2048);
        let v: serde_json::Value = serde_json::from_slice(&bytes).expect("valid JSON");
        assert_eq!(v["seq"], 42);
        assert_eq!(Stamp::decode(&bytes).unwrap(), (s, false));
    }

    #[test]
    fn exact_byte_format() {
        let s = Stamp {
            prop: 3,
            flow: b'A',
            seq: 0,
            ts: 5,
            loader: None,
        };
        assert_eq!(
            String::from_utf8(s.encode(None)).unwrap(),
            r#"{"prop":3,"flow":"A","seq":0,"ts":5}"#
        );
    }

    #[test]
    fn a_loader_id_rides_after_ts_and_round_trips() {
        let pad = rates_padding(64);
        let s = Stamp {
            prop: 8,
            flow: b'B',
            seq: 3,
            ts: 9,
            loader: Some(3),
        };
        let bytes = s.encode(Some(&pad));
        assert!(bytes.starts_with(br#"{"prop":8,"flow":"B","seq":3,"ts":9,"loader":3,"rates":["#));
        assert_eq!(Stamp::decode(&bytes).unwrap(), (s, false));
        let re = br#"{"loader": 3, "seq": 3, "ts": 9, "flow": "B", "prop": 8}"#;
        assert_eq!(Stamp::decode(re).unwrap(), (s, true));
    }

    #[test]
    fn reordered_keys_take_slow_path() {
        let doc = br#"{"seq": 9, "ts": 11, "flow": "A", "prop": 2}"#;
        let (s, slow) = Stamp::decode(doc).unwrap();
        assert!(slow);
        assert_eq!((s.prop, s.seq, s.ts, s.flow), (2, 9, 11, b'A'));
    }

    #[test]
    fn garbage_is_rejected_not_panicking() {
        for g in [
            &b""[..],
            b"{",
            b"{\"prop\":-1",
            b"not json",
            b"{\"prop\":1}",
        ] {
            assert!(
                Stamp::decode(g).is_err(),
                "{:?}",
                String::from_utf8_lossy(g)
            );
        }
    }

    #[test]
    fn integers_parse_exactly_up_to_i64s_edges() {
        assert_eq!(
            parse_int(b"999999999999999999,"),
            Some((999_999_999_999_999_999, &b","[..]))
        );
        assert_eq!(
            parse_int(b"9223372036854775807}"),
            Some((i64::MAX, &b"}"[..]))
        );
        assert_eq!(
            parse_int(b"-9223372036854775807"),
            Some((-i64::MAX, &b""[..]))
        );
        assert_eq!(parse_int(b"9223372036854775808"), None, "one past i64::MAX");
        assert_eq!(parse_int(b"00012x"), Some((12, &b"x"[..])));
        assert_eq!(parse_int(b"-"), None);
        assert_eq!(parse_int(b",1"), None);
    }

    #[test]
    fn keys() {
        assert_eq!(key_of(0), "p0");
        assert_eq!(key_of(999), "p999");
    }
}
