//! Percent-encoding of one URL path segment or query value, for the systems' HTTP
//! APIs (Queen's, RabbitMQ's management API): everything but RFC 3986's unreserved
//! characters escaped, so a vhost `/` is `%2F` and a queue named `a b` is `a%20b`.

/// `s` as one path segment.
pub fn segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_all_but_the_unreserved() {
        assert_eq!(segment("cm-ota.sync_1~"), "cm-ota.sync_1~");
        assert_eq!(segment("a/b c"), "a%2Fb%20c");
        assert_eq!(segment("/"), "%2F");
    }
}
