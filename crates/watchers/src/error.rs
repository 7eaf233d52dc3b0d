//! What can go wrong with a watcher.

use openphone_device::DeviceError;
use openphone_store::StoreError;

/// A watcher refused at creation, or a failure of the engine.
#[derive(Debug, thiserror::Error)]
pub enum WatchersError {
    /// A `watchers.create` argument breaks a rule; `field` names it.
    #[error("invalid `{field}`: {message}")]
    Invalid {
        /// The argument (`deadline_at`, `delivery.tool`, …).
        field: String,
        /// What is wrong with it.
        message: String,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The reaction's job could not be made.
    #[error("the reaction's job: {0}")]
    Job(String),
}

impl WatchersError {
    /// As the error a runtime-owned command answers with.
    pub fn into_device(self) -> DeviceError {
        match self {
            WatchersError::Invalid { field, message } => {
                DeviceError::InvalidInput { field, message }
            }
            other => DeviceError::Internal {
                message: other.to_string(),
            },
        }
    }
}
