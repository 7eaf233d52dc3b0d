//! Tokens: the rules a configured or stored token must meet, their generation, and their
//! comparison in constant time. Who a token makes its holder is `principal.rs`.

use subtle::ConstantTimeEq;

/// Runtime id recorded for operator callers.
pub const OPERATOR_RUNTIME: &str = "operator";

/// Constant-time equality of two tokens (the length is not secret).
pub fn token_eq(a: &str, b: &str) -> bool {
    a.len() == b.len() && bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

/// Fewest characters a configured or stored token may have.
pub const MIN_TOKEN_CHARS: usize = 16;

/// Why a token from the config or a file is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WeakToken {
    #[error("it is empty")]
    Empty,
    #[error("it contains whitespace or control characters")]
    Whitespace,
    #[error("it is {0} characters; at least {MIN_TOKEN_CHARS} are needed")]
    Short(usize),
    #[error("it is not UTF-8 text")]
    NotText,
}

/// Checks a token the user configured or a file holds: not empty, no whitespace or control
/// characters (a bearer header could not carry them), at least [`MIN_TOKEN_CHARS`] characters.
/// Generated tokens (64 hex characters) always pass.
pub fn check_token(token: &str) -> Result<(), WeakToken> {
    if token.trim().is_empty() {
        return Err(WeakToken::Empty);
    }
    if token.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(WeakToken::Whitespace);
    }
    match token.chars().count() {
        n if n < MIN_TOKEN_CHARS => Err(WeakToken::Short(n)),
        _ => Ok(()),
    }
}

/// A fresh operator token: 32 random bytes, hex.
pub fn generate_token() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn weak_tokens_are_refused() {
        assert_eq!(check_token(&generate_token().unwrap()), Ok(()));
        assert_eq!(check_token("0123456789abcdef"), Ok(()));
        assert_eq!(check_token(""), Err(WeakToken::Empty));
        assert_eq!(check_token("   \n"), Err(WeakToken::Empty));
        assert_eq!(check_token("abc"), Err(WeakToken::Short(3)));
        assert_eq!(check_token("ééééééééé"), Err(WeakToken::Short(9)));
        assert_eq!(check_token("0123456789 abcdef"), Err(WeakToken::Whitespace));
        assert_eq!(
            check_token("0123456789abcdef\u{0}"),
            Err(WeakToken::Whitespace)
        );
    }
}
