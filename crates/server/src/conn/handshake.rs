//! The first message of a connection: authentication (the upgrade's bearer token or `token`
//! in `hello`), the rate limit, the client's self-description (at most 256 bytes a field,
//! logged escaped), version negotiation, and for a runtime its presence.

use std::sync::Arc;

use openphone_policy::Role;
use openphone_protocol::endpoint::ClientInfo;
use openphone_protocol::endpoint::{
    EndpointErrorCode, ErrorObject, Hello, HelloDevice, HelloResult, ManifestSummary, MethodName,
    Request,
};
use openphone_protocol::limits::CLIENT_INFO_BYTES;
use openphone_protocol::{ErrorCode, MAX_VERSION, MIN_VERSION, VersionAdvertisement, log_value};
use serde_json::Value;
use tokio::sync::mpsc;

use super::{CLOSE_POLICY, Out, Session, internal, rate_limited, send_error, send_result};
use crate::principal::Principal;
use crate::state::AppState;

/// How the first message ended.
pub(super) enum Handshake {
    /// `hello` succeeded: the connection serves methods from now on.
    Ok(Session),
    /// Refused; the connection stays open for another try.
    Refused,
    /// Refused; the connection closes with this code.
    Close(u16),
}

/// Handles a message of a connection that has not said `hello` yet (answering it on `out`).
pub(super) async fn handshake(
    state: &Arc<AppState>,
    req: &Request,
    pre_auth: Option<&Principal>,
    out: &mpsc::Sender<Out>,
) -> Handshake {
    let id = Some(req.id.clone());
    if req.method_name() != Some(MethodName::Hello) {
        return match pre_auth {
            None => {
                let e = ErrorObject::new(
                    EndpointErrorCode::Unauthorized,
                    "authenticate first: a bearer token on the upgrade or `token` in `hello`",
                );
                send_error(out, id, e).await;
                Handshake::Close(CLOSE_POLICY)
            }
            Some(_) => {
                let e = ErrorObject::new(EndpointErrorCode::HelloRequired, "say `hello` first");
                send_error(out, id, e).await;
                Handshake::Refused
            }
        };
    }
    // The token is read before the rest of the params are checked: without a credential
    // every other answer is `unauthorized`.
    let token = req.params.get("token").and_then(Value::as_str);
    let principal = match (pre_auth, token) {
        (Some(p), _) => p.clone(),
        (None, Some(t)) => match state.credentials.authenticate(t) {
            Some(p) => p,
            None => {
                // Logged at most once a second: a peer without a credential must not be
                // able to flood the log.
                state.front.note(
                    state.bridge.now_ms(),
                    crate::front::Unauthenticated::WrongToken,
                );
                let e = ErrorObject::new(EndpointErrorCode::Unauthorized, "unknown token");
                send_error(out, id, e).await;
                return Handshake::Close(CLOSE_POLICY);
            }
        },
        (None, None) => {
            let e = ErrorObject::new(
                EndpointErrorCode::Unauthorized,
                "no token: send a bearer token on the upgrade or `token` in `hello`",
            );
            send_error(out, id, e).await;
            return Handshake::Close(CLOSE_POLICY);
        }
    };
    if let Err(retry) = state.rate.take(&principal.bucket_key()) {
        let e = rate_limited("too many requests; slow down", retry);
        send_error(out, id, e).await;
        return Handshake::Refused;
    }
    let params = match req.params_as::<Hello>() {
        Ok(p) => p,
        Err(e) => {
            send_error(out, id, e).await;
            return Handshake::Refused;
        }
    };
    if params.protocol.max < MIN_VERSION
        || params.protocol.min > MAX_VERSION
        || params.protocol.min > params.protocol.max
    {
        let e = ErrorObject::new(
            ErrorCode::UnsupportedVersion,
            format!(
                "no common protocol version: client {}..{}, daemon {MIN_VERSION}..{MAX_VERSION}",
                params.protocol.min, params.protocol.max
            ),
        )
        .with_runtime_protocol(VersionAdvertisement::current());
        send_error(out, id, e).await;
        return Handshake::Close(CLOSE_POLICY);
    }
    if let Err(e) = check_client(&params.client) {
        send_error(out, id, e).await;
        return Handshake::Refused;
    }
    let chosen = params.protocol.max.min(MAX_VERSION);
    let caller = principal.caller(&params.client.name);
    tracing::info!(role = principal.role().as_str(), runtime = principal.runtime_id(),
        client = %log_value(&params.client.name),
        client_version = %log_value(&params.client.version), "hello");
    let registry = state.registry;
    // What this daemon runs: the device's commands and the runtime-owned services installed
    // on the bridge (memory, watchers, jobs), not only the device's.
    let mut phone = state.profile.clone();
    phone.supported_tools = registry
        .commands()
        .filter(|c| state.bridge.offers(c))
        .map(|c| c.name.clone())
        .collect();
    // Several phones: each one the caller may act on, with its profile.
    let devices = state.bridge.devices();
    let grants = state.bridge.device_grants();
    let devices = if devices.several() {
        devices
            .iter()
            .filter(|(id, _)| {
                principal.role() == Role::Operator || grants.allows(principal.runtime_id(), id)
            })
            .map(|(id, device)| HelloDevice {
                id: id.to_owned(),
                profile: device.profile(),
            })
            .collect()
    } else {
        Vec::new()
    };
    let result = HelloResult {
        protocol_version: chosen,
        role: principal.role(),
        runtime: principal.runtime_id().to_owned(),
        runtime_protocol: VersionAdvertisement::current(),
        phone,
        manifests: ManifestSummary {
            commands_version: registry.commands_version(),
            commands: registry.commands().map(|c| c.name.clone()).collect(),
            events: registry.events().iter().map(|e| e.name.clone()).collect(),
            capabilities: registry
                .capabilities()
                .iter()
                .map(|c| c.id.clone())
                .collect(),
        },
        devices,
    };
    let result = match serde_json::to_value(result) {
        Ok(v) => v,
        Err(e) => {
            send_error(out, id, internal(e)).await;
            return Handshake::Refused;
        }
    };
    let presence = match caller.role {
        Role::Operator => None,
        Role::Runtime => match state.runtimes.connect(&caller.runtime) {
            Ok(p) => Some(p),
            Err(e) => {
                send_error(out, id, ErrorObject::new(e.code, e.message)).await;
                return Handshake::Close(CLOSE_POLICY);
            }
        },
    };
    send_result(out, req.id.clone(), result).await;
    Handshake::Ok(Session {
        principal,
        caller,
        _presence: presence,
    })
}

/// `client.name` and `client.version` are the client's word, recorded and logged: at most
/// [`CLIENT_INFO_BYTES`] each, or `invalid_params` (the connection stays open for another try).
fn check_client(client: &ClientInfo) -> Result<(), ErrorObject> {
    for (field, value) in [("name", &client.name), ("version", &client.version)] {
        if value.len() > CLIENT_INFO_BYTES {
            return Err(ErrorObject::new(
                ErrorCode::InvalidParams,
                format!(
                    "`client.{field}` is {} bytes; at most {CLIENT_INFO_BYTES} are accepted",
                    value.len()
                ),
            ));
        }
    }
    Ok(())
}
