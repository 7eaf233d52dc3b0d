//! The rule for URLs the phone connects out to (`runtime-protocol.md` §16.1): `wss` always;
//! `ws` only to loopback and private addresses written literally.
//!
//! `https://` and `http://` are normalised to `wss://` and `ws://` (case-insensitively). Host
//! names other than `localhost` are never resolved to decide: `ws://gateway.example` is
//! refused even if it would resolve to a private address. IPv4 must be four canonical decimal
//! octets (no octal, hex, leading zeros or short forms); the only IPv6 literal allowed for `ws`
//! is `[::1]`.

/// Why an outbound URL is refused (the adapter's status becomes `insecure_transport_denied`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransportError {
    #[error("{0:?} is not a URL with a scheme and a host")]
    Malformed(String),
    #[error("scheme {0:?} is not allowed: use wss:// (or ws:// to a loopback or private address)")]
    Scheme(String),
    #[error(
        "ws:// to {0:?} is not allowed: plain WebSocket only to loopback or private addresses; use wss://"
    )]
    InsecureHost(String),
}

/// Checks an outbound runtime URL; returns the effective URL (scheme normalised).
pub fn check_outbound_url(url: &str) -> Result<String, TransportError> {
    let url = url.trim();
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| TransportError::Malformed(url.to_owned()))?;
    let scheme = match scheme.to_ascii_lowercase().as_str() {
        "wss" | "https" => "wss",
        "ws" | "http" => "ws",
        _ => return Err(TransportError::Scheme(scheme.to_owned())),
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = host_of(host_port).ok_or_else(|| TransportError::Malformed(url.to_owned()))?;
    if scheme == "ws" && !plain_ws_allowed(host) {
        return Err(TransportError::InsecureHost(host.to_owned()));
    }
    Ok(format!("{scheme}://{rest}"))
}

/// The host part of `host[:port]` / `[v6][:port]`; `None` when empty or malformed.
fn host_of(host_port: &str) -> Option<&str> {
    if let Some(v6) = host_port.strip_prefix('[') {
        let end = v6.find(']')?;
        let after = &v6[end + 1..];
        if !(after.is_empty() || after.starts_with(':')) {
            return None;
        }
        return Some(&host_port[..end + 2]);
    }
    let host = host_port.split(':').next().unwrap_or_default();
    (!host.is_empty()).then_some(host)
}

fn plain_ws_allowed(host: &str) -> bool {
    if host.eq_ignore_ascii_case("localhost") || host == "[::1]" {
        return true;
    }
    let Some([a, b, _, _]) = canonical_ipv4(host) else {
        return false;
    };
    a == 127
        || a == 10
        || (a == 172 && (16..=31).contains(&b))
        || (a == 192 && b == 168)
        || (a == 169 && b == 254)
}

/// Four decimal octets 0–255 without leading zeros.
fn canonical_ipv4(host: &str) -> Option<[u8; 4]> {
    let mut out = [0u8; 4];
    let mut parts = host.split('.');
    for slot in &mut out {
        let part = parts.next()?;
        let canonical = !part.is_empty()
            && part.len() <= 3
            && part.bytes().all(|b| b.is_ascii_digit())
            && (part == "0" || !part.starts_with('0'));
        if !canonical {
            return None;
        }
        *slot = part.parse().ok()?;
    }
    parts.next().is_none().then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every row of the spec's table (§16.1).
    #[test]
    fn spec_table() {
        let allow = [
            ("wss://gateway.example/ws", "wss://gateway.example/ws"),
            ("https://gateway.example/ws", "wss://gateway.example/ws"),
            ("ws://127.0.0.1:8787", "ws://127.0.0.1:8787"),
            ("http://localhost:8787", "ws://localhost:8787"),
            ("ws://10.0.0.2", "ws://10.0.0.2"),
            ("ws://172.16.0.2", "ws://172.16.0.2"),
            ("ws://172.31.255.10", "ws://172.31.255.10"),
            ("ws://192.168.1.50", "ws://192.168.1.50"),
            ("ws://169.254.10.20", "ws://169.254.10.20"),
            ("ws://[::1]:8787", "ws://[::1]:8787"),
        ];
        for (url, effective) in allow {
            assert_eq!(check_outbound_url(url).as_deref(), Ok(effective), "{url}");
        }
        let deny = [
            "ws://8.8.8.8",
            "ws://172.32.0.2",
            "ws://172.15.255.254",
            "ws://gateway.example",
            "http://gateway.example",
            "ws://localhost.example.com",
            "ftp://gateway.example",
        ];
        for url in deny {
            assert!(check_outbound_url(url).is_err(), "{url} must be refused");
        }
    }

    #[test]
    fn non_canonical_and_other_ipv6_forms_are_refused() {
        for url in [
            "ws://0x7f.0.0.1",
            "ws://0177.0.0.1",
            "ws://127.1",
            "ws://127.0.0.1.5",
            "ws://010.0.0.1",
            "ws://[::ffff:127.0.0.1]",
            "ws://[fe80::1]",
            "ws://256.0.0.1",
            "ws://user@8.8.8.8",
        ] {
            assert!(check_outbound_url(url).is_err(), "{url} must be refused");
        }
    }

    #[test]
    fn schemes_are_case_insensitive_and_userinfo_is_not_the_host() {
        assert_eq!(
            check_outbound_url("HTTPS://Gateway.example").as_deref(),
            Ok("wss://Gateway.example")
        );
        assert_eq!(
            check_outbound_url("WS://LOCALHOST:1").as_deref(),
            Ok("ws://LOCALHOST:1")
        );
        assert!(check_outbound_url("ws://localhost@8.8.8.8/").is_err());
        assert!(matches!(
            check_outbound_url("gateway.example"),
            Err(TransportError::Malformed(_))
        ));
        assert!(matches!(
            check_outbound_url("wss://"),
            Err(TransportError::Malformed(_))
        ));
        assert!(matches!(
            check_outbound_url("file:///etc"),
            Err(TransportError::Scheme(_))
        ));
    }
}
