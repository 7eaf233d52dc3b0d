//! Who a token makes its holder: the operator or one configured runtime ([`Principal`]),
//! and every credential the endpoint accepts ([`Credentials`]), matched in constant time
//! (the token rules are `auth.rs`).

use openphone_policy::{Caller, Role, Transport};

use crate::auth::{OPERATOR_RUNTIME, token_eq};
use crate::config::RuntimeCredential;

/// The rate-limit bucket key of runtime credential `c`: `runtime:<id>`.
fn runtime_bucket_key(c: &RuntimeCredential) -> String {
    format!("runtime:{}", c.id)
}

/// The MCP principal of runtime credential `c` ([`Principal::mcp_principal`]).
fn mcp_principal_of(c: &RuntimeCredential) -> openphone_mcp::McpPrincipal {
    let mut caller = Caller::remote(&c.id, Transport::Mcp, &format!("token:{}", c.id));
    caller.enabled = c.enabled;
    caller.grants = c.grants;
    caller.max_autonomy = c.max_autonomy;
    openphone_mcp::McpPrincipal {
        caller,
        confirming_host: c.trust_client_confirmation,
    }
}

/// An authenticated credential.
#[derive(Debug, Clone)]
pub enum Principal {
    Operator,
    Runtime(RuntimeCredential),
}

impl Principal {
    /// The key of the credential's rate-limit bucket.
    pub fn bucket_key(&self) -> String {
        match self {
            Principal::Operator => "operator".into(),
            Principal::Runtime(c) => runtime_bucket_key(c),
        }
    }

    pub fn role(&self) -> Role {
        match self {
            Principal::Operator => Role::Operator,
            Principal::Runtime(_) => Role::Runtime,
        }
    }

    /// The runtime id (`operator` for the operator).
    pub fn runtime_id(&self) -> &str {
        match self {
            Principal::Operator => OPERATOR_RUNTIME,
            Principal::Runtime(c) => &c.id,
        }
    }

    /// The MCP principal of a runtime credential (`None` for the operator: MCP callers are
    /// always runtimes). `client` is what the connection says it is, recorded only.
    pub fn mcp_principal(&self) -> Option<openphone_mcp::McpPrincipal> {
        match self {
            Principal::Operator => None,
            Principal::Runtime(c) => Some(mcp_principal_of(c)),
        }
    }

    /// The policy caller for requests made with this credential. `client_name` picks the
    /// operator's surface (`openphone-cli` → `cli`).
    pub fn caller(&self, client_name: &str) -> Caller {
        match self {
            Principal::Operator => {
                let transport = if client_name == "openphone-cli" {
                    Transport::Cli
                } else {
                    Transport::Websocket
                };
                Caller::operator(OPERATOR_RUNTIME, transport, "operator-token")
            }
            Principal::Runtime(c) => {
                let mut caller =
                    Caller::remote(&c.id, Transport::Websocket, &format!("token:{}", c.id));
                caller.enabled = c.enabled;
                caller.grants = c.grants;
                caller.max_autonomy = c.max_autonomy;
                caller
            }
        }
    }
}

/// Every token the endpoint accepts.
#[derive(Clone)]
pub struct Credentials {
    operator_token: String,
    runtimes: Vec<RuntimeCredential>,
    /// Beside each of `runtimes`, what `/mcp` admits it as ([`Credentials::authenticate_mcp`]).
    mcp: Vec<McpAdmission>,
}

/// Whose a matched token is: the operator's, or the runtime credential at this index.
#[derive(Clone, Copy)]
enum Holder {
    Operator,
    Runtime(usize),
}

/// What the `/mcp` guard needs of a runtime credential, made once with the credentials rather
/// than on every request (the principal, its class key and its rate bucket took eight
/// allocations a call: issue 34).
#[derive(Debug, Clone)]
pub(crate) struct McpAdmission {
    /// The credential's [`Principal::mcp_principal`].
    pub(crate) principal: std::sync::Arc<openphone_mcp::McpPrincipal>,
    /// [`Principal::bucket_key`]: the key its connections are counted under.
    pub(crate) bucket: String,
    /// The key of its MCP rate bucket: `mcp:` and the bucket key.
    pub(crate) rate_key: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("runtimes", &self.runtimes)
            .finish_non_exhaustive()
    }
}

impl Credentials {
    pub fn new(operator_token: String, runtimes: Vec<RuntimeCredential>) -> Self {
        let mcp = runtimes
            .iter()
            .map(|credential| {
                let bucket = runtime_bucket_key(credential);
                McpAdmission {
                    principal: std::sync::Arc::new(mcp_principal_of(credential)),
                    rate_key: format!("mcp:{bucket}"),
                    bucket,
                }
            })
            .collect();
        Self {
            operator_token,
            runtimes,
            mcp,
        }
    }

    /// The credential a presented token belongs to on the WebSocket endpoint (MCP-only
    /// credentials are not accepted there).
    pub fn authenticate(&self, presented: &str) -> Option<Principal> {
        self.authenticate_any(presented).filter(|p| match p {
            Principal::Runtime(c) => !c.mcp_only,
            Principal::Operator => true,
        })
    }

    /// The credential a presented token belongs to, MCP-only ones included. Every candidate is
    /// compared, so the time taken does not reveal which one matched.
    pub fn authenticate_any(&self, presented: &str) -> Option<Principal> {
        match self.holder(presented)? {
            Holder::Operator => Some(Principal::Operator),
            Holder::Runtime(i) => self.runtimes.get(i).cloned().map(Principal::Runtime),
        }
    }

    /// What `/mcp` (and `mcp.sock`) admits a presented token as: a runtime credential's
    /// [`McpAdmission`] (MCP-only ones included); `None` for the operator's token (MCP callers
    /// are runtimes) and for any other. The same answer as [`Credentials::authenticate_any`]
    /// followed by [`Principal::mcp_principal`], without copying the credential.
    pub(crate) fn authenticate_mcp(&self, presented: &str) -> Option<&McpAdmission> {
        match self.holder(presented)? {
            Holder::Operator => None,
            Holder::Runtime(i) => self.mcp.get(i),
        }
    }

    /// Whose token `presented` is. Every candidate is compared, so the time taken does not
    /// reveal which one matched (the first match counts).
    fn holder(&self, presented: &str) -> Option<Holder> {
        let mut found = None;
        if token_eq(presented, &self.operator_token) {
            found = Some(Holder::Operator);
        }
        for (i, rt) in self.runtimes.iter().enumerate() {
            if token_eq(presented, &rt.token) && found.is_none() {
                found = Some(Holder::Runtime(i));
            }
        }
        found
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::auth::generate_token;

    #[test]
    fn authenticates_each_role_and_refuses_others() {
        let op = generate_token().unwrap();
        assert_eq!(op.len(), 64);
        let creds = Credentials::new(
            op.clone(),
            vec![RuntimeCredential {
                id: "hermes".into(),
                token: "hermes-token-0123456789".into(),
                enabled: true,
                grants: openphone_policy::ExposureGrants::REMOTE_DEFAULT,
                max_autonomy: openphone_policy::Autonomy::AskBeforeAction,
                trust_client_confirmation: false,
                mcp_only: false,
            }],
        );
        assert!(matches!(creds.authenticate(&op), Some(Principal::Operator)));
        assert!(matches!(
            creds.authenticate("hermes-token-0123456789"),
            Some(Principal::Runtime(c)) if c.id == "hermes"
        ));
        assert!(creds.authenticate("hermes-token-012345678").is_none());
        assert!(creds.authenticate("").is_none());
        assert!(!format!("{creds:?}").contains(&op));
    }

    /// `/mcp` admits a token as the credentials made once say, which is what authenticating
    /// it on every request said: each runtime (MCP-only too) as its own principal, bucket and
    /// rate key; the operator and unknown tokens not at all.
    #[test]
    fn the_mcp_admission_made_once_is_the_per_request_one() {
        let op = generate_token().unwrap();
        let runtime = |id: &str, mcp_only: bool| RuntimeCredential {
            id: id.into(),
            token: format!("{id}-token-0123456789"),
            enabled: !mcp_only,
            grants: openphone_policy::ExposureGrants::REMOTE_DEFAULT,
            max_autonomy: openphone_policy::Autonomy::TrustedActions,
            trust_client_confirmation: mcp_only,
            mcp_only,
        };
        let creds = Credentials::new(
            op.clone(),
            vec![runtime("hermes", false), runtime("mcp", true)],
        );
        for token in [
            op.as_str(),
            "hermes-token-0123456789",
            "mcp-token-0123456789",
            "mcp-token-012345678",
            "",
        ] {
            let slow = creds.authenticate_any(token).and_then(|p| {
                let key = p.bucket_key();
                p.mcp_principal().map(|m| (m, key))
            });
            let fast = creds.authenticate_mcp(token);
            match (slow, fast) {
                (None, None) => {}
                (Some((principal, bucket)), Some(admission)) => {
                    assert_eq!(principal.caller, admission.principal.caller, "{token}");
                    assert_eq!(
                        principal.confirming_host, admission.principal.confirming_host,
                        "{token}"
                    );
                    assert_eq!(admission.bucket, bucket);
                    assert_eq!(admission.rate_key, format!("mcp:{bucket}"));
                }
                (slow, fast) => panic!("{token}: {slow:?} against {fast:?}"),
            }
        }
        assert!(
            creds.authenticate_mcp(&op).is_none(),
            "the operator is no MCP caller"
        );
    }
}
