//! Secrets never reach a file the harness writes.
//!
//! Passwords in URLs (`scheme://user:secret@host`) become `***`, and so do the
//! values of keys that name a secret (`password`, `token`, `secret`, `passwd`,
//! `api_key`) in `key=value`, `key: value` and `"key": "value"` forms.

const SECRET_KEYS: [&str; 6] = ["password", "passwd", "token", "secret", "api_key", "apikey"];

/// Redact every secret in `text`.
pub fn redact(text: &str) -> String {
    redact_keys(&redact_urls(text))
}

/// `scheme://user:pass@host` → `scheme://user:***@host`.
fn redact_urls(text: &str) -> String {
    adapters::redact::redact_url_passwords(text)
}

fn redact_keys(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for (n, line) in text.split_inclusive('\n').enumerate() {
        let _ = n;
        out.push_str(&redact_line(line));
    }
    out
}

fn redact_line(line: &str) -> String {
    let lower = line.to_ascii_lowercase();
    let mut result = line.to_string();
    for key in SECRET_KEYS {
        let mut search_from = 0;
        while let Some(pos) = lower[search_from..].find(key) {
            let start = search_from + pos;
            let after = start + key.len();
            search_from = after;
            // Skip a closing quote of a JSON key, then spaces, then the separator.
            let bytes = lower.as_bytes();
            let mut j = after;
            while j < bytes.len() && (bytes[j] == b'"' || bytes[j] == b'\'') {
                j += 1;
            }
            while j < bytes.len() && bytes[j] == b' ' {
                j += 1;
            }
            if j >= bytes.len() || !(bytes[j] == b'=' || bytes[j] == b':') {
                continue;
            }
            j += 1;
            while j < bytes.len() && (bytes[j] == b' ' || bytes[j] == b'"' || bytes[j] == b'\'') {
                j += 1;
            }
            let vstart = j;
            while j < bytes.len()
                && !matches!(
                    bytes[j],
                    b' ' | b'"' | b'\'' | b',' | b'\n' | b'\r' | b'&' | b'}'
                )
            {
                j += 1;
            }
            if j > vstart && &result[vstart..j] != "***" {
                result.replace_range(vstart..j, "***");
                return redact_line(&result);
            }
        }
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_passwords() {
        assert_eq!(
            redact("dsn: postgres://bench:hunter2@127.0.0.1:5432/db?sslmode=disable"),
            "dsn: postgres://bench:***@127.0.0.1:5432/db?sslmode=disable"
        );
        assert_eq!(
            redact("amqp://guest:guest@127.0.0.1:5672/%2f"),
            "amqp://guest:***@127.0.0.1:5672/%2f"
        );
        assert_eq!(redact("http://127.0.0.1:6632"), "http://127.0.0.1:6632");
    }

    #[test]
    fn key_values() {
        let r = redact("token: abc123\n--set queen.token=xyz other=1\n{\"password\": \"pw\"}");
        assert!(
            !r.contains("abc123") && !r.contains("xyz") && !r.contains("\"pw\""),
            "{r}"
        );
        assert!(r.contains("other=1"));
    }
}
