//! Stream message bodies: the pipeline's stamp (flow `S`, prop = partition) and a
//! `"pad"` string that brings the message to the configured size. Random pad
//! characters by default (incompressible, as the seeds ran), one repeated character
//! on request. The stamp's `ts` is the *scheduled* instant.

use bytes::Bytes;

use crate::workload::stamp::Stamp;

/// The flow letter of stream messages in logs and `produced.meta`.
pub const FLOW: u8 = b'S';

/// Builds message bodies of one size.
#[derive(Debug, Clone)]
pub struct Body {
    bytes: usize,
    compressible: bool,
    /// Random URL-safe characters the pads are cut from.
    pool: std::sync::Arc<Vec<u8>>,
}

const POOL: usize = 1 << 20;

impl Body {
    pub fn new(bytes: u64, compressible: bool, seed: u64) -> Body {
        let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        let mut x = seed ^ 0x9E37_79B9_7F4A_7C15;
        let pool = if compressible {
            Vec::new()
        } else {
            (0..POOL)
                .map(|_| {
                    // xorshift64*
                    x ^= x >> 12;
                    x ^= x << 25;
                    x ^= x >> 27;
                    alphabet[(x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 58) as usize]
                })
                .collect()
        };
        Body {
            bytes: bytes as usize,
            compressible,
            pool: std::sync::Arc::new(pool),
        }
    }

    /// One message of partition `p`, sequence `seq`, scheduled at `ts` (µs since epoch).
    pub fn encode(&self, p: u64, seq: u32, ts: i64) -> Bytes {
        let mut v = Vec::with_capacity(self.bytes.max(64));
        Stamp {
            prop: p,
            flow: FLOW,
            seq: i64::from(seq),
            ts,
            loader: None,
        }
        .encode_into(None, &mut v);
        v.pop(); // the closing brace
        v.extend_from_slice(b",\"pad\":\"");
        let pad = self.bytes.saturating_sub(v.len() + 2);
        if self.compressible {
            v.resize(v.len() + pad, b'x');
        } else {
            // A different cut of the pool for every (partition, seq).
            let h = (p.wrapping_mul(0x9E37_79B9_7F4A_7C15)
                ^ u64::from(seq).wrapping_mul(0xC2B2_AE3D_27D4_EB4F)) as usize;
            let mut off = h % (POOL - pad.min(POOL - 1));
            let mut left = pad;
            while left > 0 {
                let n = left.min(POOL - off);
                v.extend_from_slice(&self.pool[off..off + n]);
                left -= n;
                off = 0;
            }
        }
        v.extend_from_slice(b"\"}");
        Bytes::from(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_size_valid_json_and_decodable() {
        for compressible in [false, true] {
            let b = Body::new(256, compressible, 7);
            let m = b.encode(999_999, 42, 1_700_000_000_000_000);
            assert_eq!(m.len(), 256);
            let v: serde_json::Value = serde_json::from_slice(&m).unwrap();
            assert_eq!(v["seq"], 42);
            let (s, slow) = Stamp::decode(&m).unwrap();
            assert!(!slow);
            assert_eq!((s.prop, s.seq, s.flow), (999_999, 42, FLOW));
        }
    }

    #[test]
    fn random_pads_differ_between_messages() {
        let b = Body::new(256, false, 1);
        assert_ne!(b.encode(1, 1, 0)[60..], b.encode(1, 2, 0)[60..]);
        let c = Body::new(256, true, 1);
        assert!(c.encode(1, 1, 0).ends_with(b"xxxx\"}"));
    }
}
