//! Passwords in URLs never reach an error message or a file: `scheme://user:secret@host`
//! becomes `scheme://user:***@host`, for every URL in a text.

/// Redact the password of every `scheme://user:password@host` in `text`.
pub fn redact_url_passwords(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("://") {
        let (head, tail) = rest.split_at(i + 3);
        out.push_str(head);
        // The authority ends at the first '/', '?', whitespace or quote; the
        // credentials end at its last '@' (a password may itself contain '@').
        let end = tail
            .find(|c: char| c == '/' || c == '?' || c.is_whitespace() || c == '"' || c == '\'')
            .unwrap_or(tail.len());
        let authority = &tail[..end];
        match (authority.rfind('@'), authority.find(':')) {
            (Some(at), Some(colon)) if colon < at => {
                out.push_str(&authority[..colon]);
                out.push_str(":***");
                out.push_str(&authority[at..]);
            }
            _ => out.push_str(authority),
        }
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_url_in_a_text() {
        assert_eq!(
            redact_url_passwords(
                "a postgres://u:p@w@h:5432/db?x=1 and amqp://g:g@127.0.0.1:5672/%2f"
            ),
            "a postgres://u:***@h:5432/db?x=1 and amqp://g:***@127.0.0.1:5672/%2f"
        );
        assert_eq!(
            redact_url_passwords("http://127.0.0.1:6632"),
            "http://127.0.0.1:6632"
        );
        assert_eq!(redact_url_passwords("no url"), "no url");
    }
}
