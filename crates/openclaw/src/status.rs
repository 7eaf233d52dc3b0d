//! The adapter's state, as the user sees it (`runtimes list`, `openphone openclaw status`).
//!
//! Each state carries its reason and the next step; "connected" is only claimed when it is
//! true (hello-ok received, command surface approved, tools published, traffic fresh).

/// Where the node connection stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// `enabled = false` in the configuration.
    Disabled,
    /// Opening the socket or waiting for the handshake.
    Connecting,
    /// The gateway has not approved this device yet; an operator runs
    /// `openclaw devices approve <request id>`.
    PairingPending { request_id: String },
    /// Connected, but the node's command surface awaits approval (`openclaw nodes approve`).
    ConnectedUnapproved,
    /// Connected, surface approved, tools published.
    Ready,
    /// The gateway refused the credentials; no automatic retry (`openphone openclaw pair`
    /// after fixing them).
    AuthFailed { reason: String },
    /// Not connected; retrying with backoff.
    Offline { reason: String },
    /// A terminal problem that is not an auth failure (surface rejected, protocol mismatch).
    Stopped { reason: String },
}

impl Status {
    /// The status string: `connecting`, `pairing_pending <request id>`,
    /// `connected_unapproved`, `ready`, `auth_failed: <reason>`, `offline: <reason>`,
    /// `stopped: <reason>`, `disabled`.
    pub fn line(&self) -> String {
        match self {
            Status::Disabled => "disabled".into(),
            Status::Connecting => "connecting".into(),
            Status::PairingPending { request_id } => format!("pairing_pending {request_id}"),
            Status::ConnectedUnapproved => "connected_unapproved".into(),
            Status::Ready => "ready".into(),
            Status::AuthFailed { reason } => format!("auth_failed: {reason}"),
            Status::Offline { reason } => format!("offline: {reason}"),
            Status::Stopped { reason } => format!("stopped: {reason}"),
        }
    }

    /// The next step for the user, with the exact gateway command where there is one.
    pub fn next_step(&self) -> Option<String> {
        match self {
            Status::PairingPending { request_id } => Some(format!(
                "approve this phone on the gateway: openclaw devices approve {request_id}"
            )),
            Status::ConnectedUnapproved => Some(
                "approve this phone's commands on the gateway: openclaw nodes pending, then \
                 openclaw nodes approve <requestId>"
                    .into(),
            ),
            Status::AuthFailed { .. } => Some(
                "fix the [openclaw] credentials (token, token_env, password_env or a new \
                 setup code) and restart the daemon"
                    .into(),
            ),
            _ => None,
        }
    }

    /// Whether the runtime can take requests.
    pub fn is_ready(&self) -> bool {
        matches!(self, Status::Ready)
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.line())
    }
}
