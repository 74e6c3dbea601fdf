//! Key → lane mapping shared by the adapters that place keys themselves.
//!
//! The reference harness hashes a key onto `lanes` physical lanes with FNV-1a 32 when
//! lanes < keys; with lanes ≥ keys every key is its own lane. Kafka does not use this
//! (librdkafka's murmur2 partitioner places keys).

/// FNV-1a, 32 bit.
pub fn fnv1a32(data: &[u8]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for &b in data {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

/// Lane index of `key` among `lanes` lanes.
pub fn lane_of(key: &str, lanes: u64) -> u64 {
    u64::from(fnv1a32(key.as_bytes())) % lanes.max(1)
}

/// Lane name used as the physical ordering key: the key itself when every key has its
/// own lane (`lanes >= keys`), else `l<fnv1a32(key) mod lanes>`.
pub fn lane_key(key: &str, lanes: u64, keys: u64) -> String {
    if lanes >= keys {
        key.to_string()
    } else {
        format!("l{}", lane_of(key, lanes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv_known_vectors() {
        // Published FNV-1a 32 test vectors.
        assert_eq!(fnv1a32(b""), 0x811c_9dc5);
        assert_eq!(fnv1a32(b"a"), 0xe40c_292c);
        assert_eq!(fnv1a32(b"foobar"), 0xbf9c_f968);
    }

    #[test]
    fn lane_key_identity_when_enough_lanes() {
        assert_eq!(lane_key("p17", 1000, 1000), "p17");
        assert!(lane_key("p17", 10, 1000).starts_with('l'));
        assert!(lane_of("p17", 10) < 10);
    }
}
