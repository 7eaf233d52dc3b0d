//! What a `tools/call` reads of the request it answers: its id, its `_meta`, its cancellation
//! token, the client's declared identity and — when rmcp carries the request — the peer that
//! progress notifications and elicitations go to.
//!
//! Two paths build a [`Site`]: rmcp's handler, from its request context, and the direct path
//! (`crate::direct`), which answers a plain `tools/call` without rmcp's service machinery. A
//! direct call has no peer, and needs none: it carries no progress token (such a call goes to
//! rmcp), and nobody can be asked mid-call — a 2026-07-28 confirming host is asked through
//! `input_required`, and a handshake-era session is taken only if its client declared no
//! elicitation.

use rmcp::model::{Implementation, ProtocolVersion, RequestId, RequestMetaObject};
use rmcp::service::{ElicitationMode, Peer, RequestContext, RoleServer};
use tokio_util::sync::CancellationToken;

use super::strategy::{ElicitationModes, Era};

/// The request a call answers.
pub(crate) struct Site {
    /// The JSON-RPC id.
    pub(crate) id: RequestId,
    /// The request's `_meta` (rmcp moves it out of the params; the direct path does too).
    pub(crate) meta: RequestMetaObject,
    /// Cancelled by an explicit cancel, a closed connection or the daemon's shutdown.
    pub(crate) ct: CancellationToken,
    /// The peer of an rmcp connection or session; `None` on the direct path.
    pub(crate) peer: Option<Peer<RoleServer>>,
    /// The client's declared identity (`clientInfo`), read once.
    pub(crate) client: Option<Implementation>,
}

impl Site {
    /// The site of a request rmcp hands the handler.
    pub(crate) fn of_context(context: RequestContext<RoleServer>) -> Site {
        // Read before the context is taken apart: in the handshake era it is the session's
        // `initialize`; in the 2026-07-28 era only the request's `_meta` speaks for the client
        // (rmcp would fall back to a stand-in of its own, `rmcp`, for a request without
        // `clientInfo`; the direct path reads `_meta` alone, and the two must count a client's
        // calls under one key: `slots.rs`).
        let client = match era_of(&context.meta) {
            Era::Stateless => context.meta.client_info(),
            Era::Handshake => context.client_info(),
        };
        Site {
            id: context.id,
            meta: context.meta,
            ct: context.ct,
            peer: Some(context.peer),
            client,
        }
    }

    /// The protocol era: 2026-07-28 and later carry their version in `_meta`.
    pub(crate) fn era(&self) -> Era {
        era_of(&self.meta)
    }

    /// The elicitation modes a handshake-era client declared in its `initialize`; none without
    /// a peer.
    pub(crate) fn session_elicitation(&self) -> ElicitationModes {
        let Some(peer) = &self.peer else {
            return ElicitationModes::default();
        };
        let modes = peer.supported_elicitation_modes();
        ElicitationModes {
            form: modes.contains(&ElicitationMode::Form),
            url: modes.contains(&ElicitationMode::Url),
        }
    }

    /// Whether the answer can no longer reach the client. rmcp's peer knows; on the direct
    /// path the token fires when the HTTP request is dropped (or the daemon stops, which the
    /// caller checks first).
    pub(crate) fn transport_closed(&self) -> bool {
        match &self.peer {
            Some(peer) => peer.is_transport_closed(),
            None => self.ct.is_cancelled(),
        }
    }
}

/// The protocol era of a request with `meta`.
pub(crate) fn era_of(meta: &RequestMetaObject) -> Era {
    let modern = meta
        .protocol_version()
        .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str());
    if modern {
        Era::Stateless
    } else {
        Era::Handshake
    }
}
