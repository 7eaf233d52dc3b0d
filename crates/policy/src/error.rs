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
    /// A tool profile name that no profile has; the message lists the known names.
    #[error("unknown tool profile `{name}` (known: {known})")]
    UnknownProfile { name: String, known: String },
    /// A selector of a profile that names no category or command of the manifest.
    #[error(
        "tool profile `{profile}` includes `{selector}`, which names no category or canonical \
         command name of the manifest"
    )]
    UnknownProfileSelector { profile: String, selector: String },
    /// A profile file that does not parse or breaks a rule of its own.
    #[error("tool profiles: {0}")]
    ProfileFile(String),
}
