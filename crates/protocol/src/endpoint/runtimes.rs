//! Runtimes, routing and the attention flow (`runtime-protocol.md` §2.3):
//! `attention.request`, `runtime.message`, `runtime.list`, `runtime.select`, and the
//! `runtime.attention.requested` payload.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::NoParams;
use super::sessions::SessionStatus;
use super::untrusted::UntrustedData;
use crate::autonomy::Autonomy;

crate::wire_enum!(
    /// How a runtime is reached.
    RuntimeKind {
        /// The daemon's own agent loop (answers `runtime_not_configured` while no model is
        /// configured for it).
        Builtin = "builtin",
        /// A runtime that connects to the daemon's WebSocket endpoint.
        Websocket = "websocket",
        /// The OpenClaw node adapter: the daemon connects out to an OpenClaw gateway.
        Openclaw = "openclaw",
        /// The Hermes Agent adapter: the daemon drives Hermes through its API server.
        Hermes = "hermes",
    }
);

crate::wire_enum!(
    /// The routing roles of the phone's entry points.
    #[derive(PartialOrd, Ord)]
    Surface {
        Chat = "chat",
        Volume = "volume",
        Background = "background",
    }
);

impl Surface {
    /// Parses a routing role name, ignoring surrounding whitespace (case still matters):
    /// how configuration and `runtime.select` read a surface.
    pub fn parse_trimmed(s: &str) -> Option<Surface> {
        Surface::parse(s.trim())
    }

    /// The routing role an entry point uses: voice entry points the `volume` route, watchers
    /// and jobs the `background` route, everything else `chat`.
    pub fn for_source(source: Source) -> Surface {
        match source {
            Source::ClassicVoice | Source::IslandVoice | Source::VolumeVoice => Surface::Volume,
            Source::Watcher | Source::Job | Source::BackgroundJob => Surface::Background,
            Source::ChatVoice | Source::DynamicIsland | Source::Notification | Source::Chat => {
                Surface::Chat
            }
        }
    }
}

crate::wire_enum!(
    /// The normalised entry points of §2.3.
    Source {
        ClassicVoice = "classic_voice",
        ChatVoice = "chat_voice",
        IslandVoice = "island_voice",
        VolumeVoice = "volume_voice",
        DynamicIsland = "dynamic_island",
        Watcher = "watcher",
        Job = "job",
        Notification = "notification",
        Chat = "chat",
        BackgroundJob = "background_job",
    }
);

impl Source {
    /// Normalises an entry point (trimmed, lower-cased); unknown values become `chat`.
    pub fn normalize(raw: &str) -> Source {
        Source::parse(&raw.trim().to_lowercase()).unwrap_or(Source::Chat)
    }
}

crate::wire_enum!(
    /// One runtime's state.
    RuntimeState {
        /// At least one connection.
        Connected = "connected",
        /// Configured and enabled, not connected.
        Idle = "idle",
        /// Disabled in the configuration.
        Disabled = "disabled",
        /// The built-in loop without a configured model.
        NotConfigured = "not_configured",
    }
);

crate::wire_enum!(
    /// The runtime manager's aggregate status over the enabled WebSocket runtimes (§13.5).
    ManagerStatus {
        /// No enabled WebSocket runtime.
        NotConfigured = "not_configured",
        /// None connected.
        Offline = "offline",
        /// All connected.
        Connected = "connected",
        /// Some connected.
        Degraded = "degraded",
    }
);

crate::wire_enum!(
    /// What happened to an accepted attention request.
    AttentionStatus {
        /// Delivered to the runtime as `runtime.attention.requested`.
        Sent = "sent",
    }
);

/// `attention.request` params. Unknown fields are ignored.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AttentionRequestParams {
    /// The entry point (`chat`, `volume_voice`, …); unknown or empty values become `chat`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub surface: String,
    /// What the user asked (required; empty after trimming → `missing_text`).
    pub text: String,
    /// A runtime to use instead of the one routed for the surface.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<String>,
    /// Autonomy granted to the session, normalised leniently (default `ask_before_action`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autonomy: Option<String>,
    /// Attach the current screen (read through the bridge).
    #[serde(default, skip_serializing_if = "is_false")]
    pub include_screen: bool,
    /// Extra context, delivered wrapped as untrusted data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<Value>,
    /// Which phone session the request belongs to: `isolated` (a new session, the default),
    /// `main` (the runtime's most recent chat session that has not failed, or a new one) or
    /// `session:<phone_session_id>` (continue that session: it must be the same runtime's and
    /// active or completed; a completed one is re-opened). See [`SessionTarget::parse`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_target: Option<String>,
}

/// The parsed `session_target` of an attention request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionTarget {
    /// A new phone session.
    Isolated,
    /// The runtime's most recent chat session that has not failed, or a new one.
    Main,
    /// Continue this phone session.
    Session(String),
}

impl SessionTarget {
    /// Parses `isolated`, `main` or `session:<id>` (surrounding whitespace ignored); absent or
    /// empty is `isolated`. Anything else is refused with a one-line reason.
    pub fn parse(raw: Option<&str>) -> Result<SessionTarget, String> {
        let Some(raw) = raw.map(str::trim).filter(|r| !r.is_empty()) else {
            return Ok(SessionTarget::Isolated);
        };
        match raw {
            "isolated" => Ok(SessionTarget::Isolated),
            "main" => Ok(SessionTarget::Main),
            _ => match raw.strip_prefix("session:").map(str::trim) {
                Some(id) if !id.is_empty() => Ok(SessionTarget::Session(id.to_owned())),
                _ => Err(format!(
                    "unknown session_target \"{}\": use isolated, main or \
                     session:<phone_session_id>",
                    crate::log_value(raw)
                )),
            },
        }
    }
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// `attention.request` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AttentionAccepted {
    /// Always `true`.
    pub ok: bool,
    pub status: AttentionStatus,
    /// `sent to <runtime>`.
    pub message: String,
    pub phone_session_id: String,
    pub attention_id: String,
    pub runtime: String,
    pub runtime_session_id: String,
}

/// `runtime.attention.requested` payload: an attention request delivered to a runtime.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AttentionRequested {
    pub runtime: String,
    pub phone_session_id: String,
    pub attention_id: String,
    pub runtime_session_id: String,
    pub source: Source,
    /// The request text, cut to 18,000 characters.
    pub text: String,
    pub autonomy: Autonomy,
    pub include_screen: bool,
    /// The caller's context, when it sent one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<UntrustedData>,
    /// The screen (screenshot bytes replaced by a marker), with `include_screen`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub screen: Option<UntrustedData>,
}

/// `runtime.message` params: a reply for one of the caller's own sessions. Unknown fields are
/// ignored.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RuntimeMessageParams {
    pub phone_session_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_session_id: Option<String>,
    pub text: String,
    /// `true` ends the turn.
    #[serde(default, rename = "final")]
    pub is_final: bool,
    /// An explicit `openphone.assistant_output.v1` envelope (final messages only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    /// The runtime reports that the turn failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The attention request this reply answers (`runtime.attention.requested`'s
    /// `attention_id`), when the runtime says so: a follow-up in a busy session is told apart
    /// from the turn before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attention_id: Option<String>,
}

/// `runtime.message` result: the session after the message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RuntimeMessageResult {
    pub phone_session_id: String,
    pub status: SessionStatus,
}

/// `runtime.list` params: none (any fields are ignored).
pub type RuntimeListParams = NoParams;

/// One runtime as listed to operators.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RuntimeInfo {
    pub id: String,
    pub kind: RuntimeKind,
    pub enabled: bool,
    pub status: RuntimeState,
    /// Open connections.
    pub connections: usize,
    /// Surfaces routed to it.
    pub surfaces: Vec<Surface>,
    /// An adapter's own status line (OpenClaw: `connecting`, `pairing_pending <request id>`,
    /// `connected_unapproved`, `ready`, `auth_failed: <reason>`, `offline: <reason>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// Its active elevation (`runtime.elevate`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elevation: Option<super::ElevationInfo>,
}

/// `runtime.list` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RuntimeListResult {
    pub status: ManagerStatus,
    pub runtimes: Vec<RuntimeInfo>,
}

/// `runtime.select` params. Unknown fields are ignored; `surface` is checked by the daemon
/// (see [`RuntimeSelectParams::surface`]), so an unknown one is an `invalid_params` naming
/// the three routes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RuntimeSelectParams {
    pub surface: String,
    pub runtime: String,
}

impl RuntimeSelectParams {
    /// The routing role named (surrounding whitespace ignored).
    pub fn surface(&self) -> Option<Surface> {
        Surface::parse_trimmed(&self.surface)
    }
}

/// `runtime.select` result: the route now in effect.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RuntimeSelectResult {
    pub surface: Surface,
    pub runtime: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_normalise_and_route() {
        assert_eq!(Source::normalize(" Volume_Voice "), Source::VolumeVoice);
        assert_eq!(Source::normalize("pager"), Source::Chat);
        assert_eq!(Surface::for_source(Source::VolumeVoice), Surface::Volume);
        assert_eq!(Surface::for_source(Source::Job), Surface::Background);
        assert_eq!(Surface::for_source(Source::Notification), Surface::Chat);
    }

    #[test]
    fn surfaces_parse_trimmed_but_case_sensitive() {
        assert_eq!(Surface::parse_trimmed("\tvolume\n"), Some(Surface::Volume));
        assert_eq!(Surface::parse_trimmed(" Volume"), None);
        assert_eq!(Surface::parse(" volume"), None, "the wire form is exact");
    }

    #[test]
    fn session_targets_parse() {
        assert_eq!(SessionTarget::parse(None), Ok(SessionTarget::Isolated));
        assert_eq!(
            SessionTarget::parse(Some("  ")),
            Ok(SessionTarget::Isolated)
        );
        assert_eq!(
            SessionTarget::parse(Some("isolated")),
            Ok(SessionTarget::Isolated)
        );
        assert_eq!(
            SessionTarget::parse(Some(" main ")),
            Ok(SessionTarget::Main)
        );
        assert_eq!(
            SessionTarget::parse(Some("session: phone-sess-1")),
            Ok(SessionTarget::Session("phone-sess-1".into()))
        );
        for bad in ["session:", "Main", "sessions:x", "other"] {
            assert!(SessionTarget::parse(Some(bad)).is_err(), "{bad}");
        }
        let p: AttentionRequestParams =
            serde_json::from_value(serde_json::json!({"text": "hi", "session_target": "main"}))
                .unwrap();
        assert_eq!(p.session_target.as_deref(), Some("main"));
    }

    #[test]
    fn select_surface_ignores_whitespace_only() {
        let p = |s: &str| RuntimeSelectParams {
            surface: s.into(),
            runtime: "hermes".into(),
        };
        assert_eq!(p(" chat ").surface(), Some(Surface::Chat));
        assert_eq!(p("Chat").surface(), None);
    }
}
