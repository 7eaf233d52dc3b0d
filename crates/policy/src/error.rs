//! Configuration errors. Deciding never fails; only building inputs from raw strings can.

/// A policy input that could not be built from its raw form.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// A transport name outside the closed set.
    #[error("unknown transport {0:?} (expected websocket, mcp, cli, openclaw or internal)")]
    UnknownTransport(String),
    /// An empty tool-list or standing-approval tool entry.
    #[error("empty tool entry")]
    EmptyToolSelector,
    /// `group:` without a category.
    #[error("tool group entry `group:` names no category")]
    EmptyToolGroup,
}
