//! The transport-independent half of OpenPhone's MCP server (`spec/mcp.md`): the tool catalogue
//! derived from the command manifest, `tools/call` name resolution, the mapping of ToolBridge
//! results onto MCP results, and the server's identity. Only this crate imports `rmcp`; the
//! stdio and Streamable HTTP transports build on it.
//!
//! # Names (§4.2)
//!
//! The exposed name is the manifest name with every `.` replaced by `_`
//! (`openphone.ui.tap` → `openphone_ui_tap`), so hosts that only accept
//! `^[a-zA-Z0-9_-]{1,64}$` can use every tool. The string rule is not invertible (segments
//! already contain `_`: `openphone.ui.tap_element`, `openphone.screen.understand_local`), and the
//! spec defines no escape, so reversibility comes from a **table** ([`ToolTable`]) built once from
//! the manifest. Building it fails, listing every problem, when a derived name is not portable,
//! when two commands derive the same name, or when an exposed name equals another command's
//! canonical name, alias or model-tool name. Every tool also carries its manifest name in
//! `_meta["dev.openphone/command"]`.
//!
//! A call name is resolved through the table first; a name the table does not list goes through
//! the manifest's own `resolve()` (canonical name, alias, model-tool name), so
//! `openphone.screen.get` and `get_screen` keep working without being listed. `mcp: false`
//! commands (`openphone.messages.send`, `openphone.calls.place`) are never listed and are
//! refused under every name — canonical, alias, model-tool name and the would-be exposed name —
//! as the tool result `tool_not_granted` with `details.policy = "transport_not_allowed"` (the L1
//! denial of `runtime-protocol.md` §8.2). An unknown name is the protocol error -32602
//! `Unknown tool: <name>` with `data.code = "unknown_tool"`; a call without a name is the tool
//! result `missing_tool`.
//!
//! # Tools (§4.3–§4.6)
//!
//! Every `mcp: true` command becomes one [`rmcp::model::Tool`], sorted by exposed name:
//! the title derived from the name (`openphone.` dropped, split on `.`/`_`/`-`, words
//! capitalised, `UI` and `URL` in capitals; the manifest has no `title` member yet), also copied to
//! `annotations.title`; the manifest description plus one sentence for `ask_before_action` or
//! `always` and the `reason` sentence; `inputSchema` and `outputSchema` unchanged (both must be
//! `type: "object"`). A deprecated command keeps its tool and names its replacement in the
//! description and in `_meta` (`dev.openphone/deprecated`, `dev.openphone/supersededBy`).
//!
//! Annotations follow the table of §4.4, not the upstream server's rule: a `safe_read` /
//! `private_read` command is `readOnlyHint: true` (destructive and idempotent hints omitted); a
//! `dangerous` command is `readOnlyHint: false`, `idempotentHint: false` and `destructiveHint`
//! false only at `risk: low`. `openWorldHint` is false only for OpenPhone's own state (categories
//! `memory`, `watchers`, `background`, `device`, `runtime`) and always emitted, because MCP reads
//! an absent `destructiveHint` or `openWorldHint` as true. `_meta` carries `dev.openphone/command`,
//! `risk`, `confirmation`, `exposure` and `capability`.
//!
//! # Results (§5.2, §5.3, §7.5)
//!
//! `ok` → `structuredContent` = the result object, `isError: false`, and a text block that is
//! the result's JSON when it is short (≤ 600 characters) and otherwise a compact summary
//! ([`summary_text`]: scalars, sizes of arrays and objects), since `structuredContent` carries
//! the data. A **policy outcome** — `needs_confirmation` (`pending`), `denied`, `timeout`
//! (`expired`), [`policy_outcome`] — is the phone's or the user's decision, not a failure: it is
//! `isError: false` with `structuredContent` `{outcome, done: false, confirmation_id?, error}`
//! (every output schema is an open object), so hosts that count error results towards a circuit
//! breaker (Hermes Agent) keep talking to the phone after a "no". The other statuses (`error`,
//! `cancelled`) → `isError: true`, no `structuredContent`. Both carry one text block
//! `{"error": {code, message, retryable, details}}` whose message ends with the next step for
//! the model. A pending confirmation's text names the confirmation id, where the user approves
//! it, and `openphone_confirmation_status` ([`CONFIRMATION_STATUS_TOOL`], listed beside the
//! phone's tools) to collect the outcome.
//! `_meta["dev.openphone/toolResult"]` = `{request_id, status, audit_id, error?,
//! confirmation_id?}`. Invalid arguments are never protocol errors: the bridge's `invalid_params`
//! result names each field, and [`invalid_arguments`] builds one from the manifest validators'
//! field errors with JSON pointers in `details.errors`. A call whose text holds a key twice is
//! `invalid_params` naming the key: the transports read the raw text before rmcp keeps only
//! the last value ([`META_DUPLICATE_KEY`]).
//!
//! # Identity (§2.1)
//!
//! [`server_config`]: `serverInfo` `{name: "openphone", title, version: <project version>,
//! description}`, capabilities `tools: {listChanged: true}` only, model-facing instructions, and
//! the runtime-protocol advertisement in `_meta["dev.openphone/runtimeProtocol"]`.

mod call;
mod catalogue;
mod direct;
mod finish;
mod identity;
mod names;
mod result;
mod server;
mod sessions;
mod status_tool;
mod strict;
mod sync;
mod table_problem;
mod text_summary;
mod transport;

pub use call::CallError;
pub use catalogue::{
    ALWAYS_SENTENCE, ASK_BEFORE_ACTION_SENTENCE, CONFIRMATIONS_GET, CatalogueError,
    META_CAPABILITY, META_COMMAND, META_CONFIRMATION, META_DEPRECATED, META_EXPOSURE, META_RISK,
    META_SUPERSEDED_BY, REASON_SENTENCE, TableProblem, ToolTable, annotations, catalogue,
    description, resolve_call, with_status_tool,
};
pub use identity::{
    FALLBACK_HANDSHAKE_VERSION, META_RUNTIME_PROTOCOL, SERVER_DESCRIPTION, SERVER_NAME,
    SERVER_TITLE, SERVER_VERSION, SUPPORTED_PROTOCOL_VERSIONS, capabilities, instructions,
    runtime_protocol_meta, server_config, server_info,
};
pub use names::{MAX_TOOL_NAME_LEN, derived_title, is_portable_tool_name, tool_name};
pub use result::{
    MAX_FIELD_ERRORS, META_TOOL_RESULT, call_result, invalid_arguments, json_pointer, next_step,
    pending_message, policy_outcome, retryable, summary_text,
};

pub use server::{
    CONFIRM_INPUT, GENERIC_CLIENT_NAMES, LIST_TTL_MS, MAX_IDEMPOTENCY_KEY_LEN,
    MAX_IN_FLIGHT_PER_CLIENT, META_AUTONOMY, META_DEVICE_ID, META_IDEMPOTENCY_KEY, McpBackend,
    McpPrincipal, McpSettings, PhoneMcp, SOURCE_ELICITATION, SOURCE_INPUT_RESPONSE, StateSeal,
    client_name,
};
pub use sessions::{
    HTTP_SESSION_IDLE, MAX_HTTP_SESSIONS, MAX_HTTP_SESSIONS_PER_PRINCIPAL, McpSessions,
    SessionsError, creating_as,
};
pub use status_tool::{
    CONFIRMATION_STATUS_COMMAND, CONFIRMATION_STATUS_TOOL, confirmation_status_tool,
    is_confirmation_status,
};
pub use strict::{MAX_LINE_BYTES, META_DUPLICATE_KEY};
pub use transport::{
    CancellationToken, HttpOptions, HttpResponse, LOOPBACK_ORIGINS, MAX_HTTP_BODY_BYTES,
    McpHttpService, http_service, serve_stream, serve_unavailable,
};

/// Re-exported so transports use the exact pinned `rmcp` this crate builds against.
pub use rmcp;
