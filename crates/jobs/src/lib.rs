//! Background agent jobs (`docs/spec/agent-jobs.md`): durable work that continues after a
//! conversation ends, on the daemon's injected clock.
//!
//! - [`model`]: the 29-field job record and its enums (persisted by `openphone-store`, which
//!   defines them once; re-exported here), the delivery mode and the job view of the tools;
//! - [`transition`](mod@transition): the transition table of §2.3 in one place ([`transition()`]) and the
//!   effects of each edge ([`apply`]);
//! - [`validate`]: creation (§5): the arguments, their normalisation, errors naming the field;
//! - [`schedule`]: the backoff ladder and the single-wake rule as pure functions;
//! - [`runner`]: the [`JobRunner`] trait, the run context (deadline, stop signal) and the
//!   runners of `system_event` and `heartbeat`;
//! - [`scheduler`]: the [`Scheduler`] (§6): ticks, claims, runners, repair, stop, pause,
//!   resume and the driver loop;
//! - [`review`]: reviewed background approvals (§9): eligibility and sanitisation, the
//!   confirmation record and checkpoint, verification, bound results, the executor of approved
//!   calls over the tool bridge, and the offline verifier [`check_stored`];
//! - [`artifacts`]: the files every job leaves under `<data dir>/artifacts/jobs/<id>/`
//!   (spec, one file per run, `status.md`); [`maintenance`]: what a heartbeat does;
//! - [`reason`]: the failure reasons of §7.8; [`limits`]: the numbers of §6.1.
//!
//! Not here yet: the `agent_turn` runner (the built-in model loop), the job tools and endpoint
//! methods (§10), and delivery of notifications.

pub mod artifacts;
pub mod delivery;
pub mod error;
pub mod limits;
pub mod maintenance;
pub mod model;
pub mod reason;
pub mod review;
pub mod runner;
pub mod schedule;
pub mod scheduler;
pub mod service;
pub mod transition;
pub mod validate;

pub use artifacts::JobArtifacts;
pub use error::JobsError;
pub use maintenance::{HealthProbe, MaintenanceReport, MaintenanceRunner};
pub use model::{
    AgentJob, AgentJobExt, DeliveryMode, DeliveryState, JobPhase, JobRun, JobStatus, JobType,
    JobView, NewAgentJob, RunOutcome, StoredJob,
};
pub use reason::FailureReason;
pub use review::{
    BoundResult, BridgeReviewExecutor, CheckFailure, Checked, CheckedKind, Checkpoint,
    ConfirmationRecord, ExecutionFailure, Resolution, ReviewAnswer, ReviewDecision, ReviewExecutor,
    ReviewProposal, ReviewRefused, check_stored,
};
pub use runner::{
    HeartbeatRunner, JobRunner, LateRunner, RunContext, RunResult, Runners, StopSignal,
    SystemEventRunner, dispatch_ref,
};
pub use scheduler::{
    Asker, Scheduler, SchedulerConfig, SchedulerEvent, StopOutcome, TickReport, WeakScheduler,
};
pub use service::JobTools;
pub use transition::{Change, IllegalTransition, JobEvent, apply, transition};
pub use validate::{CreateContext, InvalidJob, JobRequest, for_creator, normalise};
