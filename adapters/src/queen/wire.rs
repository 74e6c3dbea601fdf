//! Request and answer shapes of the Queen HTTP API (verified on Queen 0.15; see
//! compose/queen/README.md). Answers are decoded leniently: unknown fields are ignored
//! and optional ones defaulted, so newer servers that add fields still work.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// `GET /health`.
#[derive(Debug, Deserialize)]
pub(crate) struct Health {
    #[serde(default)]
    pub status: String,
    #[serde(default)]
    pub version: Option<String>,
    #[serde(default)]
    pub database: Option<String>,
}

/// `POST /api/v1/configure` answer.
#[derive(Debug, Deserialize)]
pub(crate) struct Configured {
    #[serde(default)]
    pub configured: bool,
    #[serde(default)]
    pub error: Option<String>,
    /// The options as the server stored them (unknown keys are dropped silently, which
    /// is how an unsupported dedup window shows).
    #[serde(default)]
    pub options: serde_json::Map<String, serde_json::Value>,
}

/// An answer that is only an error object (`{"error": "..."}`).
#[derive(Debug, Deserialize)]
pub(crate) struct ErrorBody {
    pub error: String,
}

/// `POST /api/v1/push` answers one element per item, in input order; a failed request
/// answers an error object.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum PushAnswer {
    Items(Vec<PushResult>),
    Error(ErrorBody),
}

#[derive(Debug, Deserialize)]
pub(crate) struct PushResult {
    /// `queued`, `duplicate` or `failed`.
    #[serde(default)]
    pub status: String,
    #[serde(default)]
    pub error: Option<String>,
}

/// A pop answer. Empty and blocked pops are `success:false` with an `error` such as
/// `no_available_partition`, `lease_held` or `partition_not_found`, all HTTP 200.
#[derive(Debug, Deserialize)]
pub(crate) struct PopAnswer {
    #[serde(default)]
    pub success: Option<bool>,
    #[serde(default)]
    pub error: Option<String>,
    #[serde(default, rename = "leaseId")]
    pub lease_id: Option<String>,
    #[serde(default)]
    pub messages: Vec<PopMessage>,
}

/// Pop "errors" that only mean "nothing for you right now".
pub(crate) fn is_empty_pop(error: &str) -> bool {
    matches!(
        error,
        "no_available_partition" | "lease_held" | "partition_not_found" | "no_messages"
    )
}

#[derive(Debug, Deserialize)]
pub(crate) struct PopMessage {
    #[serde(rename = "transactionId")]
    pub transaction_id: String,
    #[serde(rename = "partitionId")]
    pub partition_id: String,
    /// The partition's name (= the ordering key or lane).
    #[serde(default)]
    pub partition: String,
    #[serde(default, rename = "leaseId")]
    pub lease_id: Option<String>,
    /// The payload, passed through as the server wrote it.
    pub data: Box<RawValue>,
}

/// Ack status values (reference pitfall P6: a batch is refused by acking its first
/// message `retry`, which releases the lease without advancing the cursor or counting a
/// retry, so the whole batch comes back; `failed` on every item can push messages into
/// the DLQ and move the cursor past others).
pub(crate) const COMPLETED: &str = "completed";
pub(crate) const RETRY: &str = "retry";

/// One element of `POST /api/v1/ack/batch`.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct AckItem {
    #[serde(rename = "transactionId")]
    pub transaction_id: String,
    #[serde(rename = "partitionId")]
    pub partition_id: String,
    /// Always sent: fencing only applies when it is (reference pitfall P7).
    #[serde(rename = "leaseId")]
    pub lease_id: String,
    pub status: &'static str,
    #[serde(rename = "consumerGroup")]
    pub consumer_group: String,
}

#[derive(Debug, Serialize)]
pub(crate) struct AckBatch<'a> {
    /// Must be sent, or the ack moves the queue-mode cursor instead of the group's.
    #[serde(rename = "consumerGroup")]
    pub consumer_group: &'a str,
    pub acknowledgments: &'a [AckItem],
}

/// The ack answer: one element per ack, in input order (or an error object).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum AckAnswer {
    Items(Vec<AckResult>),
    Wrapped { data: Vec<AckResult> },
    Error(ErrorBody),
}

#[derive(Debug, Deserialize)]
pub(crate) struct AckResult {
    #[serde(default)]
    pub success: bool,
    #[serde(default)]
    pub error: Option<String>,
}

/// Append one push item to a JSON body under construction. The payload goes in
/// verbatim (it must be a JSON document).
pub(crate) fn push_item(out: &mut Vec<u8>, queue: &str, partition: &str, tx: &str, payload: &[u8]) {
    out.extend_from_slice(b"{\"queue\":");
    out.extend_from_slice(serde_json::to_string(queue).expect("string").as_bytes());
    out.extend_from_slice(b",\"partition\":");
    out.extend_from_slice(serde_json::to_string(partition).expect("string").as_bytes());
    out.extend_from_slice(b",\"transactionId\":\"");
    out.extend_from_slice(tx.as_bytes());
    out.extend_from_slice(b"\",\"payload\":");
    out.extend_from_slice(payload);
    out.push(b'}');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_body_is_json_with_the_payload_verbatim() {
        let mut b = b"{\"items\":[".to_vec();
        push_item(&mut b, "q\"1", "p7", "tx-1", br#"{"a": 1}"#);
        b.extend_from_slice(b"]}");
        let v: serde_json::Value = serde_json::from_slice(&b).unwrap();
        assert_eq!(v["items"][0]["queue"], "q\"1");
        assert_eq!(v["items"][0]["payload"]["a"], 1);
        assert!(String::from_utf8(b)
            .unwrap()
            .contains(r#""payload":{"a": 1}"#));
    }

    #[test]
    fn decodes_answers() {
        let p: PopAnswer = serde_json::from_str(
            r#"{"success":false,"error":"no_available_partition","messages":[]}"#,
        )
        .unwrap();
        assert!(is_empty_pop(p.error.as_deref().unwrap()));
        let p: PopAnswer = serde_json::from_str(
            r#"{"success":true,"leaseId":"L","messages":[{"id":"m","transactionId":"t","partitionId":"pid","partition":"p1","leaseId":"L","data":{"x":[1,2]},"createdAt":"z"}]}"#,
        )
        .unwrap();
        assert_eq!(p.messages[0].data.get(), r#"{"x":[1,2]}"#);
        let a: AckAnswer = serde_json::from_str(
            r#"[{"index":0,"success":false,"error":"Invalid or expired lease"}]"#,
        )
        .unwrap();
        assert!(matches!(a, AckAnswer::Items(ref v) if !v[0].success));
        let a: AckAnswer = serde_json::from_str(r#"{"error":"partitionId is required"}"#).unwrap();
        assert!(matches!(a, AckAnswer::Error(_)));
        let a: PushAnswer = serde_json::from_str(r#"[{"index":0,"status":"duplicate"}]"#).unwrap();
        assert!(matches!(a, PushAnswer::Items(ref v) if v[0].status == "duplicate"));
    }
}

/// Fuzzed answers (issue 17): every answer shape decoded from arbitrary bytes and from
/// mutations of real answers (bytes flipped, inserted, deleted, truncated; numbers
/// swapped for huge or negative ones; JSON tokens inserted), then a pop's messages
/// grouped into claims, on `CROSSBENCH_FUZZ_CASES` (default 10 000) answers. Decoding
/// answers `Ok` or `Err`, never panics; claims keep every message, once, under its
/// own partition.
#[cfg(test)]
mod fuzz {
    use super::super::stream::claims_of;
    use super::*;
    use proptest::prelude::*;
    use proptest::test_runner::RngAlgorithm;

    fn config() -> ProptestConfig {
        let cases = std::env::var("CROSSBENCH_FUZZ_CASES")
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(10_000);
        ProptestConfig {
            cases,
            rng_algorithm: RngAlgorithm::XorShift,
            ..ProptestConfig::default()
        }
    }

    /// Answers as Queen 0.15 writes them (compose/queen/README.md).
    const SEEDS: &[&str] = &[
        r#"{"success":true,"leaseId":"L","messages":[{"id":"m","transactionId":"t1","partitionId":"pid","partition":"p1","leaseId":"L","data":{"prop":1,"flow":"S","seq":1,"ts":5},"createdAt":"z"},{"transactionId":"t2","partitionId":"pid","partition":"p1","data":{"x":[1,2]}},{"transactionId":"t3","partitionId":"q","partition":"p2","leaseId":"","data":"s"}]}"#,
        r#"{"success":false,"error":"no_available_partition","messages":[]}"#,
        r#"[{"index":0,"status":"queued"},{"index":1,"status":"duplicate"},{"index":2,"status":"failed","error":"x"}]"#,
        r#"[{"index":0,"success":false,"error":"Invalid or expired lease"},{"index":1,"success":true}]"#,
        r#"{"data":[{"success":true}]}"#,
        r#"{"error":"partitionId is required"}"#,
        r#"{"status":"healthy","version":"0.15.2","database":"connected"}"#,
        r#"{"configured":true,"options":{"leaseTime":30,"retryLimit":3}}"#,
    ];

    const TOKENS: &[&str] = &[
        "{",
        "}",
        "[",
        "]",
        ",",
        ":",
        "\"",
        "\\",
        "\\u0000",
        "\\ud800",
        " ",
        "null",
        "true",
        "false",
        "\"messages\":",
        "\"data\":",
        "\"leaseId\":",
        "\"partition\":",
        "\"transactionId\":",
        "\"partitionId\":",
        "\"success\":",
        "\"error\":",
        "\"status\":",
        "\"options\":",
        "-1",
        "1e400",
        "18446744073709551616",
        "\"é\"",
        "[[[[[[[[",
    ];

    const NUMBERS: &[&str] = &[
        "0",
        "-1",
        "1e400",
        "-1e400",
        "18446744073709551616",
        "0.5",
        "NaN",
    ];

    #[derive(Debug, Clone)]
    enum Op {
        Byte(usize, u8),
        Token(usize, usize),
        Delete(usize, usize),
        Truncate(usize),
        Number(usize, usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        let i = any::<usize>;
        prop_oneof![
            (i(), any::<u8>()).prop_map(|(a, b)| Op::Byte(a, b)),
            (i(), i()).prop_map(|(a, b)| Op::Token(a, b)),
            (i(), 1usize..16).prop_map(|(a, b)| Op::Delete(a, b)),
            i().prop_map(Op::Truncate),
            (i(), i()).prop_map(|(a, b)| Op::Number(a, b)),
        ]
    }

    fn apply(seed: &str, ops: &[Op]) -> Vec<u8> {
        let mut b = seed.as_bytes().to_vec();
        for op in ops {
            let n = b.len();
            match *op {
                Op::Byte(i, v) if n > 0 => b[i % n] = v,
                Op::Token(i, t) => {
                    let i = i % (n + 1);
                    b.splice(i..i, TOKENS[t % TOKENS.len()].bytes());
                }
                Op::Delete(i, k) if n > 0 => {
                    let i = i % n;
                    b.drain(i..(i + k).min(n));
                }
                Op::Truncate(i) => b.truncate(i % (n + 1)),
                Op::Number(i, k) => {
                    let digits: Vec<usize> = (0..n).filter(|&j| b[j].is_ascii_digit()).collect();
                    if let Some(&at) = digits.get(i % digits.len().max(1)) {
                        b.splice(at..at + 1, NUMBERS[k % NUMBERS.len()].bytes());
                    }
                }
                _ => {}
            }
        }
        b
    }

    fn answer() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            1 => prop::collection::vec(any::<u8>(), 0..128),
            1 => prop::collection::vec(prop::sample::select(TOKENS), 0..32)
                .prop_map(|v| v.concat().into_bytes()),
            6 => (prop::sample::select(SEEDS), prop::collection::vec(op(), 1..6))
                .prop_map(|(s, ops)| apply(s, &ops)),
        ]
    }

    proptest! {
        #![proptest_config(config())]

        #[test]
        fn answers_decode_or_fail_cleanly(body in answer()) {
            let _ = serde_json::from_slice::<Health>(&body);
            let _ = serde_json::from_slice::<Configured>(&body);
            let _ = serde_json::from_slice::<ErrorBody>(&body);
            let _ = serde_json::from_slice::<PushAnswer>(&body);
            let _ = serde_json::from_slice::<AckAnswer>(&body);
            if let Ok(p) = serde_json::from_slice::<PopAnswer>(&body) {
                if let Some(e) = &p.error {
                    let _ = is_empty_pop(e);
                }
                let n = p.messages.len();
                let claims = claims_of(p.messages, p.lease_id.as_deref());
                prop_assert_eq!(claims.iter().map(|c| c.messages.len()).sum::<usize>(), n);
                for (i, c) in claims.iter().enumerate() {
                    prop_assert!(c.messages.iter().all(|m| m.partition == c.partition));
                    prop_assert!(claims[..i].iter().all(|o| o.partition != c.partition));
                }
            }
        }
    }
}
