//! The dashboard's credentials: one-time login codes and the sessions they are exchanged for,
//! held in the dashboard's part of the shared state ([`Dashboard`]).
//!
//! Both are random 32-byte values (hex), kept in memory only (a daemon restart logs everyone
//! out), compared in constant time, and timed by the daemon's clock. A code works once and for
//! [`CODE_TTL_MS`]; a session lasts [`SESSION_TTL_MS`] or until logout. Each session carries
//! its own CSRF token and a revocation signal that closes its open WebSockets at logout.

use std::sync::Mutex;

use tokio::sync::watch;

use crate::auth::token_eq;
use crate::lock::lock;

/// The dashboard part of the shared state (absent when the daemon listens on a non-loopback
/// address: the dashboard is served on loopback only).
#[derive(Debug, Default)]
pub struct Dashboard {
    pub logins: Logins,
}

/// How long a login code works.
pub const CODE_TTL_MS: i64 = 60_000;
/// How long a dashboard session lasts.
pub const SESSION_TTL_MS: i64 = 12 * 60 * 60 * 1000;
/// Most unexchanged codes kept; minting another drops the oldest.
pub const MAX_CODES: usize = 16;
/// Most sessions kept; a new login ends the oldest.
pub const MAX_SESSIONS: usize = 32;

/// The randomness source failed.
#[derive(Debug, thiserror::Error)]
#[error("no randomness for a dashboard credential: {0}")]
pub struct NoRandomness(getrandom::Error);

/// 32 random bytes as 64 hex characters.
fn random_hex() -> Result<String, NoRandomness> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(NoRandomness)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

struct Code {
    value: String,
    expires_at_ms: i64,
}

struct Session {
    id: String,
    csrf: String,
    expires_at_ms: i64,
    revoke: watch::Sender<bool>,
}

impl Session {
    fn view(&self) -> SessionView {
        SessionView {
            csrf: self.csrf.clone(),
            expires_at_ms: self.expires_at_ms,
            revoked: self.revoke.subscribe(),
        }
    }
}

/// What a request learns about the session its cookie names.
#[derive(Debug, Clone)]
pub struct SessionView {
    /// The session's token: every request but the page's must carry it (`X-OpenPhone-CSRF`,
    /// or the socket's subprotocol). Sent to the browser once, in the login answer; the page
    /// keeps it in its origin's `localStorage`, never in a cookie.
    pub csrf: String,
    pub expires_at_ms: i64,
    /// Turns `true` when the session ends (logout, or a newer login pushed it out).
    pub revoked: watch::Receiver<bool>,
}

#[derive(Default)]
struct Inner {
    codes: Vec<Code>,
    sessions: Vec<Session>,
}

/// The login codes and sessions of one daemon.
#[derive(Default)]
pub struct Logins {
    inner: Mutex<Inner>,
}

impl std::fmt::Debug for Logins {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let inner = lock(&self.inner);
        f.debug_struct("Logins")
            .field("codes", &inner.codes.len())
            .field("sessions", &inner.sessions.len())
            .finish()
    }
}

impl Inner {
    fn prune(&mut self, now_ms: i64) {
        self.codes.retain(|c| c.expires_at_ms > now_ms);
        self.sessions.retain(|s| {
            let live = s.expires_at_ms > now_ms;
            if !live {
                s.revoke.send_replace(true);
            }
            live
        });
    }
}

impl Logins {
    /// Mints a one-time code: `(code, expires_at_ms)`.
    pub fn issue_code(&self, now_ms: i64) -> Result<(String, i64), NoRandomness> {
        let value = random_hex()?;
        let expires_at_ms = now_ms.saturating_add(CODE_TTL_MS);
        let mut inner = lock(&self.inner);
        inner.prune(now_ms);
        if inner.codes.len() >= MAX_CODES {
            inner.codes.remove(0);
        }
        inner.codes.push(Code {
            value: value.clone(),
            expires_at_ms,
        });
        Ok((value, expires_at_ms))
    }

    /// Exchanges a code for a new session: `Ok(None)` for an unknown, used or expired code.
    /// Every stored code is compared, so the time taken does not tell which one matched.
    pub fn exchange(
        &self,
        code: &str,
        now_ms: i64,
    ) -> Result<Option<(String, SessionView)>, NoRandomness> {
        let (id, csrf) = (random_hex()?, random_hex()?);
        let mut inner = lock(&self.inner);
        inner.prune(now_ms);
        let mut found = None;
        for (i, c) in inner.codes.iter().enumerate() {
            if token_eq(code, &c.value) && found.is_none() {
                found = Some(i);
            }
        }
        let Some(i) = found else {
            return Ok(None);
        };
        inner.codes.remove(i);
        if inner.sessions.len() >= MAX_SESSIONS {
            let oldest = inner.sessions.remove(0);
            oldest.revoke.send_replace(true);
        }
        let (revoke, _) = watch::channel(false);
        let session = Session {
            id: id.clone(),
            csrf,
            expires_at_ms: now_ms.saturating_add(SESSION_TTL_MS),
            revoke,
        };
        let view = session.view();
        inner.sessions.push(session);
        Ok(Some((id, view)))
    }

    /// The live session with this id.
    pub fn session(&self, id: &str, now_ms: i64) -> Option<SessionView> {
        let mut inner = lock(&self.inner);
        inner.prune(now_ms);
        let mut found = None;
        for s in &inner.sessions {
            if token_eq(id, &s.id) && found.is_none() {
                found = Some(s.view());
            }
        }
        found
    }

    /// Ends a session (logout): its sockets close. `false` when there was none.
    pub fn end(&self, id: &str) -> bool {
        let mut inner = lock(&self.inner);
        let before = inner.sessions.len();
        inner.sessions.retain(|s| {
            let matches = token_eq(id, &s.id);
            if matches {
                s.revoke.send_replace(true);
            }
            !matches
        });
        inner.sessions.len() < before
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn a_code_works_once_and_only_in_time() {
        let logins = Logins::default();
        let (code, expires) = logins.issue_code(1_000).unwrap();
        assert_eq!(code.len(), 64);
        assert_eq!(expires, 1_000 + CODE_TTL_MS);
        let (id, view) = logins.exchange(&code, 2_000).unwrap().unwrap();
        assert_eq!(view.expires_at_ms, 2_000 + SESSION_TTL_MS);
        assert!(logins.exchange(&code, 2_001).unwrap().is_none());
        assert!(logins.session(&id, 2_002).is_some());

        let (late, _) = logins.issue_code(10_000).unwrap();
        assert!(
            logins
                .exchange(&late, 10_000 + CODE_TTL_MS)
                .unwrap()
                .is_none()
        );
        assert!(logins.exchange("", 10_000).unwrap().is_none());
    }

    #[test]
    fn ending_a_session_revokes_its_sockets() {
        let logins = Logins::default();
        let (code, _) = logins.issue_code(0).unwrap();
        let (id, view) = logins.exchange(&code, 0).unwrap().unwrap();
        assert!(!*view.revoked.borrow());
        assert!(logins.end(&id));
        assert!(*view.revoked.borrow());
        assert!(logins.session(&id, 1).is_none());
        assert!(!logins.end(&id));
    }

    #[test]
    fn a_session_expires_and_the_oldest_gives_way() {
        let logins = Logins::default();
        let mut ids = Vec::new();
        for _ in 0..=MAX_SESSIONS {
            let (code, _) = logins.issue_code(0).unwrap();
            ids.push(logins.exchange(&code, 0).unwrap().unwrap().0);
        }
        assert!(logins.session(&ids[0], 1).is_none());
        assert!(logins.session(&ids[1], 1).is_some());
        assert!(logins.session(&ids[1], SESSION_TTL_MS).is_none());
    }
}
