//! The goal layer's executors for `agent_turn` and `job` actions (`goals.md` §3, the router),
//! over the daemon's built-in runtime and job scheduler, and the goal commands' installation.
//!
//! - [`BuiltinAgent`]: an `agent_turn` works its prompt on the built-in loop
//!   ([`GoalTurnRunner`]) in the runtime session the engine names (`goal:<goal>:<action>`, or
//!   `goal:<goal>` for `session_target: main`), its tool calls through the bridge as `builtin`
//!   in the goal's background context. Only with a `[builtin]` table: without one no agent
//!   backend is attached and the engine BLOCKS the action naming what is missing.
//! - [`SchedulerJobs`]: a `job` action creates an `agent_turn` job in the store through the
//!   scheduler (`run_at` as given), the job's id becoming the action's evidence.
//!
//! [`goal_backends`] builds both for the engine; [`install`] makes the engine and puts the
//! `openphone.goals.*` commands on the bridge.

use std::sync::Arc;

use async_trait::async_trait;
use openphone_agent::{BuiltinConfig, BuiltinConfigError, BuiltinSetup, GoalTurnRunner};
use openphone_core::ToolBridge;
use openphone_goals::{AgentBackend, Backends, GoalEngine, GoalTools, JobBackend, Wake};
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
    session
        .strip_prefix("goal:")
        .and_then(|rest| rest.split(':').next())
        .filter(|id| !id.is_empty())
}

#[async_trait]
impl AgentBackend for BuiltinAgent {
    async fn agent_turn(&self, session: &str, prompt: &str) -> Result<String, String> {
        let goal = goal_of_session(session)
            .ok_or_else(|| format!("{session:?} is not a goal's runtime session"))?;
        self.runner.turn(goal, session, prompt).await
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

#[async_trait]
impl JobBackend for SchedulerJobs {
    async fn create_job(
        &self,
        title: &str,
        prompt: &str,
        run_at: Option<i64>,
    ) -> Result<i64, String> {
        let mut request = Map::new();
        request.insert("title".into(), json!(title));
        request.insert("prompt".into(), json!(prompt));
        request.insert("type".into(), json!("agent_turn"));
        if let Some(at) = run_at {
            request.insert("run_at".into(), json!(at));
        }
        let request = JobRequest::from_json(&Value::Object(request)).map_err(|e| e.to_string())?;
        let job = self
            .scheduler
            .create(&request, None)
            .map_err(|e| e.to_string())?;
        Ok(job.job.id)
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

/// A wake that ticks the goal at once on its own task (until the goal driver provides its
/// own). Holds the engine weakly.
pub fn ticking_wake(engine: &Arc<GoalEngine>) -> Wake {
    let weak = Arc::downgrade(engine);
    Arc::new(move |id: &str| {
        let (Some(engine), Ok(handle)) = (weak.upgrade(), tokio::runtime::Handle::try_current())
        else {
            return;
        };
        let id = id.to_owned();
        handle.spawn(async move {
            if let Err(e) = engine.tick(&id).await {
                tracing::warn!(goal = %id, error = %e, "goal tick after a goal command");
            }
        });
    })
}

/// The daemon's goal engine, kept alive by the daemon (the goal commands hold it weakly).
pub struct Goals(pub Arc<GoalEngine>);

impl std::fmt::Debug for Goals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Goals")
    }
}

/// Makes the goal engine over the bridge (artifacts under `<data dir>/artifacts`) with
/// `backends`, and installs the `openphone.goals.*` commands on the bridge, waking through
/// `wake` (or [`ticking_wake`] when `None`).
pub fn install(
    bridge: &Arc<ToolBridge>,
    data_dir: &std::path::Path,
    backends: Backends,
    wake: Option<Wake>,
) -> Goals {
    let engine = Arc::new(GoalEngine::new(
        Arc::clone(bridge.store()),
        Arc::clone(bridge),
        backends,
        Some(data_dir.join("artifacts")),
    ));
    let wake = wake.unwrap_or_else(|| ticking_wake(&engine));
    bridge.install_service(Arc::new(GoalTools::new(&engine, wake)));
    Goals(engine)
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
