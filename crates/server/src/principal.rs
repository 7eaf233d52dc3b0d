//! Who a token makes its holder: the operator or one configured runtime ([`Principal`]),
//! and every credential the endpoint accepts ([`Credentials`]), matched in constant time
//! (the token rules are `auth.rs`).

use openphone_policy::{Caller, Role, Transport};

use crate::auth::{OPERATOR_RUNTIME, token_eq};
use crate::config::RuntimeCredential;

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
            Principal::Runtime(c) => format!("runtime:{}", c.id),
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
            Principal::Runtime(c) => {
                let mut caller = Caller::remote(&c.id, Transport::Mcp, &format!("token:{}", c.id));
                caller.enabled = c.enabled;
                caller.grants = c.grants;
                caller.max_autonomy = c.max_autonomy;
                Some(openphone_mcp::McpPrincipal {
                    caller,
                    confirming_host: c.trust_client_confirmation,
                })
            }
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
        Self {
            operator_token,
            runtimes,
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
        let mut found = None;
        if token_eq(presented, &self.operator_token) {
            found = Some(Principal::Operator);
        }
        for rt in &self.runtimes {
            if token_eq(presented, &rt.token) && found.is_none() {
                found = Some(Principal::Runtime(rt.clone()));
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
}
