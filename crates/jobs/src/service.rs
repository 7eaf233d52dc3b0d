//! The job tools (§10) as a runtime-owned service of the tool bridge:
//! `openphone.jobs.create` (`background_job_create`), `openphone.jobs.list`
//! (`background_job_list`) and `openphone.jobs.stop` (`background_job_stop`).
//!
//! The bridge has validated the params against the manifest, decided the policy (creating and
//! stopping are state-changing: confirmed in the foreground, parked for review inside a
//! background run) and only then calls [`JobTools::execute`]. The answers are the job view of
//! §10, never the prompt, payload, result trace or review data.
//!
//! Every job has an owner (issue 28). The asker of a call ([`asker`]) is the calling runtime —
//! or, for `builtin` doing a creator's work, that creator: inside a job's run
//! (`background-job:<id>`) the job's creator, in a goal's steps (`goal:<id>[:<step>]`) the
//! goal's owner, in a watcher's checks (`watcher:<id>`) the watcher's runtime
//! (`openphone_core::authority::acting_for`, shared with the watcher commands). So a runtime's
//! job or goal acts only as that runtime, and work whose owner cannot be read is refused
//! (`work_owner_unknown`), never done as the user. A runtime creates jobs as their creator against
//! its own quota, and lists and stops only its own: another's job id is `job_not_found`, the
//! same answer as an id that names nothing. The operator and `builtin` (the user's assistant)
//! see and act on every job.

use async_trait::async_trait;
use openphone_core::authority::{ActingFor, OPERATOR_CREATOR};
use openphone_core::services::{RuntimeService, ServiceCall};
use openphone_device::DeviceError;
use serde_json::{Map, Value, json};

use crate::error::JobsError;
use crate::model::JobView;
use crate::scheduler::{Asker, Scheduler, WeakScheduler};
use crate::validate::JobRequest;

/// `openphone.jobs.create`.
pub const CREATE: &str = "openphone.jobs.create";
/// `openphone.jobs.list`.
pub const LIST: &str = "openphone.jobs.list";
/// `openphone.jobs.stop`.
pub const STOP: &str = "openphone.jobs.stop";

/// The job tools over one [`Scheduler`]; installed on the bridge by the daemon. They hold the
/// scheduler weakly (the scheduler holds the bridge); once it is gone they answer
/// `framework_unavailable`.
#[derive(Debug, Clone)]
pub struct JobTools {
    scheduler: WeakScheduler,
}

impl JobTools {
    /// The tools over `scheduler`.
    pub fn new(scheduler: &Scheduler) -> JobTools {
        JobTools {
            scheduler: scheduler.downgrade(),
        }
    }

    fn scheduler(&self) -> Result<Scheduler, DeviceError> {
        self.scheduler
            .upgrade()
            .ok_or_else(|| DeviceError::DeviceOffline {
                reason: "the job scheduler has stopped (the daemon is shutting down)".to_owned(),
            })
    }

    fn create(
        &self,
        scheduler: &Scheduler,
        call: &ServiceCall<'_>,
        asker: &Asker,
    ) -> Result<Value, JobsError> {
        let request = JobRequest::from_json(&tool_args(call.params))?;
        let job = scheduler.create_as(&request, call.phone_session_id, asker)?;
        Ok(json!({ "job": JobView::from(&job.job) }))
    }

    fn list(
        &self,
        scheduler: &Scheduler,
        call: &ServiceCall<'_>,
        asker: &Asker,
    ) -> Result<Value, JobsError> {
        let query = call
            .params
            .get("query")
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|q| !q.is_empty());
        let limit = match call.params.get("limit").and_then(Value::as_i64) {
            None => None,
            Some(n) if n >= 1 => Some(usize::try_from(n).unwrap_or(usize::MAX)),
            Some(_) => {
                return Err(JobsError::Invalid(crate::validate::InvalidJob::new(
                    "limit",
                    "must be at least 1",
                )));
            }
        };
        let jobs: Vec<JobView> = scheduler
            .list_as(query, limit, asker)?
            .iter()
            .map(|row| JobView::from(&row.job))
            .collect();
        Ok(json!({ "count": jobs.len(), "jobs": jobs }))
    }

    fn stop(
        &self,
        scheduler: &Scheduler,
        call: &ServiceCall<'_>,
        asker: &Asker,
    ) -> Result<Value, JobsError> {
        let id = call
            .params
            .get("job_id")
            .and_then(Value::as_i64)
            .ok_or_else(|| {
                JobsError::Invalid(crate::validate::InvalidJob::new(
                    "job_id",
                    "must be an integer job id",
                ))
            })?;
        let outcome = scheduler.stop_as(id, asker)?;
        Ok(json!({ "job": JobView::from(&outcome.job.job), "stopped": outcome.stopped }))
    }
}

/// Whom a call acts for: the operator credential is the operator; `builtin` doing a creator's
/// work (a job's run, a goal's steps, a watcher's checks) acts for that creator, the user for
/// the user's own work; any other caller for itself. Work whose owner cannot be read (its job
/// or goal is gone) is refused (`work_owner_unknown`), never done as the user.
pub fn asker(scheduler: &Scheduler, call: &ServiceCall<'_>) -> Result<Asker, DeviceError> {
    let caller = call.caller;
    Ok(
        match scheduler.acting_for(caller, call.runtime_session_id)? {
            ActingFor::Itself if caller.is_operator() => Asker::operator(),
            ActingFor::Itself => Asker::runtime(&caller.runtime),
            ActingFor::Creator(creator) if creator == OPERATOR_CREATOR => Asker::operator(),
            ActingFor::Creator(creator) => Asker::runtime(&creator),
        },
    )
}

/// The tool's own arguments: without `reason` (the audit's).
fn tool_args(params: &Value) -> Value {
    let map: Map<String, Value> = params
        .as_object()
        .map(|m| {
            m.iter()
                .filter(|(k, _)| k.as_str() != "reason")
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .unwrap_or_default();
    Value::Object(map)
}

/// A job error as the bridge reports it: bad arguments are `invalid_params` (naming the
/// field); the rest keep their own codes (`job_not_found`, `job_limit_reached`,
/// `job_state_conflict`, `store_unavailable`).
fn device_error(error: JobsError) -> DeviceError {
    match error {
        JobsError::Invalid(invalid) => DeviceError::InvalidInput {
            field: invalid.field.clone(),
            message: invalid.to_string(),
        },
        other => DeviceError::Refused {
            code: other.code(),
            message: other.to_string(),
        },
    }
}

#[async_trait]
impl RuntimeService for JobTools {
    fn serves(&self, name: &str) -> bool {
        matches!(name, CREATE | LIST | STOP)
    }

    async fn execute(&self, call: ServiceCall<'_>) -> Result<Value, DeviceError> {
        let scheduler = self.scheduler()?;
        if !self.serves(call.name) {
            return Err(DeviceError::UnsupportedTool {
                tool: call.name.to_owned(),
            });
        }
        let asker = asker(&scheduler, &call)?;
        let outcome = match call.name {
            CREATE => self.create(&scheduler, &call, &asker),
            LIST => self.list(&scheduler, &call, &asker),
            STOP => self.stop(&scheduler, &call, &asker),
            other => {
                return Err(DeviceError::UnsupportedTool {
                    tool: other.to_owned(),
                });
            }
        };
        outcome.map_err(device_error)
    }
}
