//! Running one call on the simulated phone ([`SimPhone::dispatch`]): offline check, the
//! cached reads (`screen.get`, a plain `device.status`), other reads on the state, and
//! state-changing commands on a copy that replaces the state on success and is logged.
//! [`PhoneDevice::execute`] and [`PhoneDevice::execute_for_text`] share it; they differ only
//! in how they hand out a cached answer ([`Ran`]).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use serde_json::{Map, Value};

use crate::params::Params;
use crate::{DeviceAnswer, DeviceCall, DeviceError};

use super::commands::{Exec, Kept};
use super::{ACTION_LOG_LIMIT, ActionRecord, SimPhone, command, dialogs};

/// What a call ran to: an answer, or a cached read's kept answer and the time of the call.
pub(super) enum Ran {
    Value(Value),
    Kept(Arc<Kept>, i64),
}

impl Ran {
    /// The answer as a value (a kept one copied with the call's time).
    fn into_value(self) -> Value {
        match self {
            Ran::Value(value) => value,
            Ran::Kept(kept, now) => kept.stamped(now),
        }
    }

    /// The answer for a caller that reads it as text: a kept one as its kept text with the
    /// call's time written in (no tree is built or copied), any other as the value.
    pub(super) fn into_answer(self) -> DeviceAnswer {
        match self {
            Ran::Value(value) => DeviceAnswer::Value(value),
            Ran::Kept(kept, now) => match kept.stamped_text(now) {
                Some(text) => DeviceAnswer::Text(text),
                None => DeviceAnswer::Value(kept.stamped(now)),
            },
        }
    }
}

impl SimPhone {
    /// Runs one call (what [`crate::PhoneDevice::execute`] does): the handler is chosen by the
    /// command's canonical name, and whether it changes state is the command's own
    /// `mutating` flag.
    pub fn dispatch(&self, call: DeviceCall<'_>) -> Result<Value, DeviceError> {
        self.run(call).map(Ran::into_value)
    }

    /// [`SimPhone::dispatch`], with a cached read's answer left as it is kept (for its caller
    /// to stamp as a value or as text, after every lock is let go).
    pub(super) fn run(&self, call: DeviceCall<'_>) -> Result<Ran, DeviceError> {
        let DeviceCall {
            command: resolved,
            params,
            origin,
        } = call;
        let Some((name, handler)) = command(&resolved.name) else {
            return Err(DeviceError::UnsupportedTool {
                tool: resolved.name.clone(),
            });
        };
        let mutating = resolved.mutating;
        if !self.online.load(Ordering::SeqCst) {
            return Err(DeviceError::DeviceOffline {
                reason: "the simulated phone was switched offline".into(),
            });
        }
        if mutating {
            tracing::debug!(
                tool = %name,
                runtime = %origin.runtime,
                request_id = %origin.request_id,
                "simulated phone: state-changing command"
            );
        }
        let params_view = Params::new(params)?;
        let now = self.clock.now_ms();
        let mut guard = self.lock();
        if !mutating {
            // The cached answers are stamped after both locks are let go, so that copies
            // run side by side.
            if *name == "openphone.screen.get" {
                let generation = self.journal.generation();
                let kept = self
                    .screen_cache
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .screen_get(&guard, now, generation, params_view)?;
                return Ok(Ran::Kept(kept, now));
            }
            if *name == "openphone.device.status" {
                let generation = self.journal.generation();
                let kept = self
                    .status_cache
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .device_status(&guard, now, generation, params_view)?;
                if let Some(kept) = kept {
                    return Ok(Ran::Kept(kept, now));
                }
            }
            let mut exec = Exec {
                st: &mut guard,
                now,
            };
            return handler(&mut exec, params_view).map(|o| Ran::Value(o.result));
        }
        // The copy shares every large part with the state (`state/shared.rs`): the command
        // copies only what it writes to. The action log is taken out (no handler reads it), so
        // that appending to it below never copies it while the old state still holds it.
        let log = std::mem::take(&mut guard.action_log);
        let mut work = guard.clone();
        // A command that raises an OS dialog keeps its effect and answers the dialog.
        let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            dialogs::run(
                *handler,
                name,
                &mut Exec { st: &mut work, now },
                params_view,
            )
        }));
        let (outcome, raised) = match ran {
            Ok(Ok(ran)) => ran,
            Ok(Err(e)) => {
                guard.action_log = log;
                return Err(e);
            }
            Err(panic) => {
                // The state is untouched (the handler had a copy); keep its log too.
                guard.action_log = log;
                std::panic::resume_unwind(panic);
            }
        };
        work.action_log = log;
        let seq = work.action_log.back().map_or(1, |r| r.seq + 1);
        work.action_log.push_back(ActionRecord {
            seq,
            at_ms: now,
            tool: (*name).to_string(),
            params: public_params(params),
            summary: outcome.summary,
        });
        while work.action_log.len() > ACTION_LOG_LIMIT {
            work.action_log.pop_front();
        }
        *guard = work;
        self.journal.bump();
        match raised {
            Some(dialog) => Err(dialog),
            None => Ok(Ran::Value(outcome.result)),
        }
    }
}

/// Params without `_`-keys, which the protocol reserves (callers cannot send them), so the
/// action log never records one a direct caller passed.
fn public_params(params: &Value) -> Value {
    match params {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, _)| !k.starts_with('_'))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect::<Map<String, Value>>(),
        ),
        other => other.clone(),
    }
}
