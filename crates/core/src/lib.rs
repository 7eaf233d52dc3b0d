//! The trusted core of the OpenPhone runtime.
//!
//! [`ToolBridge`] is the one path by which any runtime touches the phone:
//! validate → decide → replay → confirm → execute → record. Around it: request normalisation
//! ([`request`]), the confirmation summary ([`summary`]), the runtime-owned services
//! ([`services`]) and the [`EventBus`] that transports subscribe to.
//!
//! A request that needs confirmation is answered at once; [`ToolBridge::wait_for_final`] is
//! the one way to wait for its final result, whatever the front end. Time is read only through
//! the injected clock ([`ToolBridge::now_ms`]).
//!
//! **Architecture Invariant:** nothing outside this crate calls a mutating device method; a
//! confirmation can only be resolved with an [`Operator`], which only an operator credential
//! yields; a background job's state-changing request runs only through
//! [`ToolBridge::invoke_reviewed`], when the store holds the user's claimed approval of exactly
//! that request.

pub mod authority;
mod bridge;
pub mod devices;
pub mod elevation;
pub mod events;
mod expiry;
pub mod invocation;
pub mod request;
pub mod runtimes;
pub mod services;
pub mod summary;
pub mod wake;

mod locks;

pub use authority::CreatorAuthority;
pub use bridge::{
    ACCESS_LOG_TARGET, ApprovalError, BridgeConfig, BridgeError, ConfirmDecision, ConfirmingHost,
    MAX_TASK_SCOPES, Operator, RESOLVED_BY_CONFIGURATION, RecoveryReport, ReviewedApproval,
    ToolBridge, Waited, Withdrawn, waiting_on,
};
pub use bridge::{EXPLANATION_KEY, explanation_of};
pub use bridge::{GOAL_GRANT_MAX_MS, GOAL_PRINCIPAL, goal_scope};
pub use bridge::{Injected, WorldError};
pub use devices::{DEFAULT_DEVICE_ID, DeviceGrants, DeviceRouteError, Devices};
pub use elevation::{ElevationConfig, ElevationRefusal};
pub use events::{Audience, Event, EventBus, PublishError, QuietSubscription};
pub use invocation::{Answer, Invocation};
pub use request::{NormalizedRequest, normalize};
pub use runtimes::{
    BUILTIN_NOT_CONFIGURED, CANCELLED_REASON, LocalRuntime, Presence, RuntimeConfigError,
    RuntimeEntry, RuntimeError, RuntimeKind, RuntimeManager, RuntimesConfig, Source, Surface,
};
pub use services::{RuntimeService, ServiceCall};
pub use wake::{WakeConfig, WakeSender};
