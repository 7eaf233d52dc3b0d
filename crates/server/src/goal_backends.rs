//! The goal layer's executors for `agent_turn` and `job` actions (`goals.md` §3, the router),
//! over the daemon's built-in runtime and job scheduler, and the goal commands' installation.
//!
//! - [`BuiltinAgent`]: an `agent_turn` works its prompt on the built-in loop
//!   ([`GoalTurnRunner`]) in the runtime session the engine names (`goal:<goal>:<action>`, or
//!   `goal:<goal>` for `session_target: main`), its tool calls through the bridge as `builtin`
//!   in the goal's background context. Only with a `[builtin]` table: without one no agent
//!   backend is attached and the engine BLOCKS the action naming what is missing.
//! - [`SchedulerJobs`]: a `job` action creates an `agent_turn` job in the store through the
//!   scheduler (`run_at` as given), the job's id becoming the action's evidence; the action
//!   stays RUNNING until the job's run finishes ([`JobBackend::progress`]: completed → done,
//!   a failed run → the action's retry path, the job stopped so it does not retry beside it).
//!
//! [`goal_backends`] builds both for the engine (which the goal driver,
//! [`crate::goals::GoalDriver`], owns); [`install_tools`] puts the `openphone.goals.*`
//! commands on the bridge, waking the driver after each change.

use std::sync::Arc;

use async_trait::async_trait;
use openphone_agent::{BuiltinConfig, BuiltinConfigError, BuiltinSetup, GoalTurnRunner};
use openphone_core::ToolBridge;
use openphone_goals::{
    AgentBackend, Backends, GoalEngine, GoalTools, JobBackend, JobProgress, Wake,
};
use openphone_jobs::JobStatus;
use openphone_jobs::{JobRequest, Scheduler};
use serde_json::{Map, Value, json};

/// `agent_turn` on the built-in loop.
#[derive(Debug, Clone)]
pub struct BuiltinAgent {
    runner: GoalTurnRunner,
}

impl BuiltinAgent {
    /// The backend over `runner`.
    pub fn new(runner: GoalTurnRunner) -> BuiltinAgent {
        BuiltinAgent { runner }
    }
}

/// The goal id in a goal's runtime session `goal:<goal>[:<action>]`.
fn goal_of_session(session: &str) -> Option<&str> {
    openphone_protocol::goal_of(session).filter(|id| !id.is_empty())
}

#[async_trait]
impl AgentBackend for BuiltinAgent {
    async fn agent_turn(&self, session: &str, prompt: &str) -> Result<String, String> {
        let goal = goal_of_session(session)
            .ok_or_else(|| format!("{session:?} is not a goal's runtime session"))?;
        self.runner.turn(goal, session, prompt).await
    }

    async fn agent_turn_on_device(
        &self,
        session: &str,
        prompt: &str,
        device: Option<&str>,
    ) -> Result<String, String> {
        let goal = goal_of_session(session)
            .ok_or_else(|| format!("{session:?} is not a goal's runtime session"))?;
        self.runner.turn_on(goal, device, session, prompt).await
    }
}

/// `job` actions as agent jobs of the daemon's scheduler.
#[derive(Debug, Clone)]
pub struct SchedulerJobs {
    scheduler: Scheduler,
}

impl SchedulerJobs {
    /// The backend over `scheduler`.
    pub fn new(scheduler: &Scheduler) -> SchedulerJobs {
        SchedulerJobs {
            scheduler: scheduler.clone(),
        }
    }
}

impl SchedulerJobs {
    /// A new `agent_turn` job, its payload naming attempt `key` when there is one.
    fn create(
        &self,
        key: Option<&str>,
        title: &str,
        prompt: &str,
        run_at: Option<i64>,
        device: Option<&str>,
    ) -> Result<i64, String> {
        let mut request = Map::new();
        request.insert("title".into(), json!(title));
        request.insert("prompt".into(), json!(prompt));
        request.insert("type".into(), json!("agent_turn"));
        if let Some(at) = run_at {
            request.insert("run_at".into(), json!(at));
        }
        if let Some(device) = device {
            request.insert("device_id".into(), json!(device));
        }
        if let Some(key) = key {
            request.insert("payload".into(), json!({ GOAL_ATTEMPT_KEY: key }));
        }
        let request = JobRequest::from_json(&Value::Object(request)).map_err(|e| e.to_string())?;
        let job = self
            .scheduler
            .create(&request, None)
            .map_err(|e| e.to_string())?;
        Ok(job.job.id)
    }

    /// The `agent_turn` job whose payload names attempt `key`.
    fn find(&self, key: &str) -> Result<Option<i64>, String> {
        let jobs = self
            .scheduler
            .list_filtered(&openphone_store::JobFilter {
                job_type: Some(openphone_jobs::JobType::AgentTurn),
                ..openphone_store::JobFilter::default()
            })
            .map_err(|e| e.to_string())?;
        Ok(jobs
            .iter()
            .find(|row| {
                row.job
                    .payload_json
                    .get(GOAL_ATTEMPT_KEY)
                    .and_then(Value::as_str)
                    == Some(key)
            })
            .map(|row| row.job.id))
    }
}

/// The payload member naming the goal attempt (`goal_<id>:<action>:<n>`) a job was made for:
/// the key that finds it again after a crash (one job per attempt).
const GOAL_ATTEMPT_KEY: &str = "goal_attempt";

#[async_trait]
impl JobBackend for SchedulerJobs {
    async fn create_job(
        &self,
        title: &str,
        prompt: &str,
        run_at: Option<i64>,
    ) -> Result<i64, String> {
        self.create(None, title, prompt, run_at, None)
    }

    async fn create_job_keyed(
        &self,
        key: &str,
        title: &str,
        prompt: &str,
        run_at: Option<i64>,
    ) -> Result<i64, String> {
        match self.find(key)? {
            Some(job) => Ok(job),
            None => self.create(Some(key), title, prompt, run_at, None),
        }
    }

    async fn create_job_on_device(
        &self,
        key: &str,
        title: &str,
        prompt: &str,
        run_at: Option<i64>,
        device: Option<&str>,
    ) -> Result<i64, String> {
        match self.find(key)? {
            Some(job) => Ok(job),
            None => self.create(Some(key), title, prompt, run_at, device),
        }
    }

    async fn job_by_key(&self, key: &str) -> Option<i64> {
        match self.find(key) {
            Ok(job) => job,
            Err(e) => {
                tracing::warn!(key, error = %e, "goals: looking up a goal attempt's job failed");
                None
            }
        }
    }

    async fn progress(&self, job_id: i64) -> JobProgress {
        let job = match self.scheduler.get(job_id) {
            Ok(row) => row.job,
            Err(e) => return JobProgress::Gone(e.to_string()),
        };
        let result = || job.last_result.chars().take(2_000).collect::<String>();
        match job.status {
            JobStatus::Completed => JobProgress::Succeeded(result()),
            JobStatus::Failed => JobProgress::Failed {
                reason: result(),
                live: false,
            },
            JobStatus::Stopped => JobProgress::Stopped,
            // A run failed and the job waits to retry by itself: that run was the action's.
            JobStatus::Queued | JobStatus::Active if job.failure_count > 0 => JobProgress::Failed {
                reason: result(),
                live: true,
            },
            JobStatus::Queued
            | JobStatus::Active
            | JobStatus::Running
            | JobStatus::Waiting
            | JobStatus::AwaitingReview
            | JobStatus::Paused
            | JobStatus::Dispatched => JobProgress::Pending(job.progress_text.clone()),
        }
    }

    async fn stop_job(&self, job_id: i64) -> Result<(), String> {
        self.scheduler
            .stop(job_id)
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
}

/// The backends of the daemon's goal engine: the built-in loop for `agent_turn` when
/// `[builtin]` is configured, the scheduler for `job`.
pub fn goal_backends(
    setup: &BuiltinSetup,
    builtin: Option<&BuiltinConfig>,
    scheduler: &Scheduler,
) -> Result<Backends, BuiltinConfigError> {
    let agent = match builtin {
        Some(config) => Some(Arc::new(BuiltinAgent::new(GoalTurnRunner::from_config(
            setup,
            Some(config),
        )?)) as Arc<dyn AgentBackend>),
        None => None,
    };
    Ok(Backends {
        agent,
        jobs: Some(Arc::new(SchedulerJobs::new(scheduler)) as Arc<dyn JobBackend>),
    })
}

/// Installs the `openphone.goals.*` commands on the bridge over `engine` (held weakly),
/// waking the goal driver through `wake` after each change.
pub fn install_tools(bridge: &Arc<ToolBridge>, engine: &Arc<GoalEngine>, wake: Wake) {
    bridge.install_service(Arc::new(GoalTools::new(engine, wake)));
}

#[cfg(test)]
mod tests {
    use super::goal_of_session;

    #[test]
    fn the_goal_is_read_from_its_runtime_sessions() {
        assert_eq!(goal_of_session("goal:goal_01ABC:step"), Some("goal_01ABC"));
        assert_eq!(goal_of_session("goal:goal_01ABC"), Some("goal_01ABC"));
        assert_eq!(goal_of_session("background-job:4"), None);
        assert_eq!(goal_of_session("goal:"), None);
    }
}
