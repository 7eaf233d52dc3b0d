//! Whose authority work runs with when the built-in runtime does it for someone else
//! (issue 28, item 5): a background job or a watcher a runtime created runs on `builtin`, but
//! never with more than its creator may do.
//!
//! [`ToolBridge::creator_authority`] is the one place this is computed. For the user's own
//! work (creator `operator` or `builtin`) it is `builtin` as configured. For a runtime's work
//! it is `builtin` narrowed to the intersection of the two:
//!
//! - **grants** (policy layer 1): the exposure classes both hold, enabled only when both are;
//!   a command only `builtin` may run (`remote_runtime: false`) is outside it, since the
//!   creator may not run it;
//! - **tool policy** (layer 2): a command must pass the global list, `builtin`'s list and the
//!   creator's list ([`CreatorAuthority::permits`]; the model is offered only those);
//! - **autonomy ceiling** (layer 4): the stricter of the two `max_autonomy`s;
//! - **standing approvals** (layer 7): the context names the creator
//!   ([`CreatorAuthority::job_context`]), so a standing approval granted for `builtin` — the
//!   user's own work — does not cover it.
//!
//! The creator's authorisation is its entry in the bridge's current runtime table
//! (`BridgeConfig::runtimes`); a creator no longer configured has none (everything refused);
//! a bridge without a runtime table (embedded use, tests) gives a runtime the remote default,
//! `safe_read` only.

use openphone_device::DeviceError;
use openphone_policy::{
    Caller, Context, ExposureGrants, RuntimeAuthorisation, ToolPolicy, Transport, visible,
};
use openphone_protocol::Command;
use openphone_store::Store;

use crate::ToolBridge;

/// `created_by` of the user's own work made through the operator's endpoint, and whether a
/// creator is the user (the operator, or `builtin`, the user's own assistant).
pub use openphone_store::{OPERATOR_CREATOR, is_user_creator};

/// The authority work done by `builtin` on behalf of one creator runs with.
#[derive(Debug, Clone)]
pub struct CreatorAuthority {
    creator: String,
    /// `builtin`, narrowed to the creator's authority.
    caller: Caller,
    /// The creator as the policy sees it (`None` for the user's own work).
    creator_caller: Option<Caller>,
    tool_policy: ToolPolicy,
}

impl CreatorAuthority {
    /// Who the work is for (`operator`, `builtin` or a runtime id).
    pub fn creator(&self) -> &str {
        &self.creator
    }

    /// Whether the work is the user's own.
    pub fn is_users(&self) -> bool {
        self.creator_caller.is_none()
    }

    /// The caller every tool request of the work is made as: `builtin` with the intersected
    /// grants and ceiling.
    pub fn caller(&self) -> &Caller {
        &self.caller
    }

    /// Whether the work may use `command` at all: layers 1 and 2 pass both for `builtin` (as
    /// narrowed) and for the creator under the tool policy. What the model is offered, and
    /// what a run may call.
    pub fn permits(&self, command: &Command) -> bool {
        visible(command, &self.caller, &self.tool_policy)
            && self
                .creator_caller
                .as_ref()
                .is_none_or(|creator| visible(command, creator, &self.tool_policy))
    }

    /// The policy context of a run of job `job_id` done for this creator: it names the
    /// creator when that is not the user, so the user's standing approvals do not apply.
    pub fn job_context(&self, job_id: u64) -> Context {
        Context::job_for(job_id, (!self.is_users()).then_some(self.creator.as_str()))
    }
}

impl ToolBridge {
    /// Who created job `job_id` (its `created_by`), whose authority the job's work has;
    /// `Ok(None)` when no such job is stored. The one read of a job's creator for the crates
    /// that work for a job (the dispatch runner, the review executor, watcher tool calls).
    pub fn job_creator(&self, job_id: i64) -> openphone_store::Result<Option<String>> {
        Ok(self.store().get_job(job_id)?.map(|row| row.created_by))
    }

    /// The authority of work `builtin` (as `builtin` is configured: `builtin`) does on behalf
    /// of `creator` — see the module documentation. `creator` is a job's `created_by` or a
    /// watcher's runtime; `operator` and `builtin` are the user.
    pub fn creator_authority(&self, builtin: &Caller, creator: &str) -> CreatorAuthority {
        let config = self.config();
        let creator = creator.trim().to_owned();
        if is_user_creator(&creator) {
            return CreatorAuthority {
                creator,
                caller: builtin.clone(),
                creator_caller: None,
                tool_policy: config.tool_policy,
            };
        }
        let theirs = match &config.runtimes {
            Some(runtimes) => runtimes
                .get(&creator)
                .copied()
                .unwrap_or(RuntimeAuthorisation::REVOKED),
            None => RuntimeAuthorisation {
                enabled: true,
                grants: ExposureGrants::REMOTE_DEFAULT,
                max_autonomy: openphone_policy::Autonomy::AskBeforeAction,
            },
        };
        let ours = builtin.authorisation();
        let both = RuntimeAuthorisation {
            enabled: ours.enabled && theirs.enabled,
            grants: ExposureGrants {
                safe_read: ours.grants.safe_read && theirs.grants.safe_read,
                private_read: ours.grants.private_read && theirs.grants.private_read,
                dangerous: ours.grants.dangerous && theirs.grants.dangerous,
            },
            max_autonomy: ours.max_autonomy.stricter(theirs.max_autonomy),
        };
        let creator_caller =
            Caller::remote(&creator, Transport::Internal, &creator).with_authorisation(theirs);
        CreatorAuthority {
            caller: builtin.with_authorisation(both),
            creator_caller: Some(creator_caller),
            creator,
            tool_policy: config.tool_policy,
        }
    }
}

/// Whom a call acts for, as far as owners go (issue 28): whose jobs and watchers it sees,
/// stops and counts, and whom the jobs and watchers it creates belong to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ActingFor {
    /// The caller itself: the operator, or a runtime working for itself (`builtin` outside a
    /// job's, goal's or watcher's work is the user's own assistant).
    Itself,
    /// `builtin` doing a creator's work: a job's `created_by`, the runtime that owns a goal,
    /// or a watcher's runtime. [`OPERATOR_CREATOR`] and `builtin` are the user.
    Creator(String),
}

impl ActingFor {
    /// The id recorded as the owner of what the call creates: [`OPERATOR_CREATOR`] for the
    /// operator, the creator for a creator's work, else the caller's runtime id (a runtime
    /// that happens to be called `operator` is `runtime:operator`, never the operator).
    pub fn owner_id(&self, caller: &Caller) -> String {
        match self {
            ActingFor::Creator(creator) => creator.clone(),
            ActingFor::Itself if caller.is_operator() => OPERATOR_CREATOR.to_owned(),
            ActingFor::Itself => {
                let id = caller.runtime.trim();
                if id == OPERATOR_CREATOR {
                    format!("runtime:{id}")
                } else {
                    id.to_owned()
                }
            }
        }
    }
}

/// Why the owner of background work could not be found: the call is refused
/// (`work_owner_unknown`), never made as the user.
fn owner_unknown(session: &str, why: impl std::fmt::Display) -> DeviceError {
    DeviceError::Refused {
        code: "work_owner_unknown",
        message: format!(
            "whose work runtime session `{session}` is cannot be told ({why}); the built-in \
             runtime does not act as the user for work it cannot attribute"
        ),
    }
}

/// For whom `caller` acts in runtime session `runtime_session_id` — the one resolution the
/// job and watcher commands share (issue 28). The operator and every runtime other than
/// `builtin` act for themselves. `builtin` working in a background session acts for that
/// work's owner:
///
/// - `background-job:<id>` (a job's run, a review's execution, a watcher's tool call): the
///   job's `created_by`;
/// - `goal:<id>` and `goal:<id>:<step>` (a goal's steps and checks): the runtime that owns
///   the goal — the user for a goal the operator made (any surface other than `runtime`);
/// - `watcher:<id>` (a watcher's own checks): the watcher's runtime.
///
/// Any other session of `builtin` is the user's assistant at work (itself). FAILS CLOSED: a
/// background session whose job, goal or watcher cannot be read, or names no owner, is
/// refused (`work_owner_unknown`), never treated as the user's.
pub fn acting_for(
    store: &Store,
    caller: &Caller,
    runtime_session_id: &str,
) -> Result<ActingFor, DeviceError> {
    if caller.is_operator() || !caller.is_builtin() {
        return Ok(ActingFor::Itself);
    }
    let session = runtime_session_id.trim();
    if let Some(id) = openphone_protocol::background_job_of(session) {
        let id: i64 = id
            .parse()
            .map_err(|_| owner_unknown(session, "not a job id"))?;
        return match store.get_job(id) {
            Ok(Some(job)) => Ok(ActingFor::Creator(job.created_by)),
            Ok(None) => Err(owner_unknown(session, format_args!("job {id} is gone"))),
            Err(e) => Err(owner_unknown(session, e)),
        };
    }
    if let Some(id) = openphone_protocol::goal_of(session) {
        if id.is_empty() {
            return Err(owner_unknown(session, "no goal id"));
        }
        let goal = match store.get_goal(id) {
            Ok(Some(goal)) => goal,
            Ok(None) => return Err(owner_unknown(session, format_args!("goal {id} is gone"))),
            Err(e) => return Err(owner_unknown(session, e)),
        };
        let owner = &goal.goal["owner"];
        let surface = owner["surface"].as_str();
        return match (surface, owner["runtime"].as_str().map(str::trim)) {
            (None, _) => Err(owner_unknown(session, "the goal names no owner")),
            (Some("runtime"), Some(runtime)) if !runtime.is_empty() => {
                Ok(ActingFor::Creator(if runtime == OPERATOR_CREATOR {
                    format!("runtime:{runtime}")
                } else {
                    runtime.to_owned()
                }))
            }
            (Some("runtime"), _) => Err(owner_unknown(session, "the goal names no runtime")),
            // Made by the operator (its endpoint, CLI, dashboard or simulator): the user's.
            (Some(_), _) => Ok(ActingFor::Creator(OPERATOR_CREATOR.to_owned())),
        };
    }
    if let Some(id) = openphone_protocol::watcher_of(session) {
        let id: i64 = id
            .parse()
            .map_err(|_| owner_unknown(session, "not a watcher id"))?;
        return match store.get_watcher(id) {
            Ok(Some(watcher)) => Ok(ActingFor::Creator(watcher.runtime)),
            Ok(None) => Err(owner_unknown(session, format_args!("watcher {id} is gone"))),
            Err(e) => Err(owner_unknown(session, e)),
        };
    }
    Ok(ActingFor::Itself)
}

/// Whether an elevation of `caller`'s runtime may lift this call: only the runtime's own
/// foreground calls. Never a background run (a job's, goal's or watcher's, nobody present),
/// and never `builtin` doing a creator's work in a job's, goal's or watcher's session — an
/// elevation of `builtin` is the user's for their own assistant, not for every runtime whose
/// jobs `builtin` runs.
pub fn elevation_applies(caller: &Caller, runtime_session_id: &str, context: &Context) -> bool {
    if context.is_background() {
        return false;
    }
    if caller.is_operator() || !caller.is_builtin() {
        return true;
    }
    let session = runtime_session_id.trim();
    openphone_protocol::background_job_of(session).is_none()
        && openphone_protocol::goal_of(session).is_none()
        && openphone_protocol::watcher_of(session).is_none()
}
