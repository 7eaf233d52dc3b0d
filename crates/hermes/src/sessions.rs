//! The phone session ↔ Hermes session map. A phone session's turns all run in one Hermes
//! session (`openphone-<phone session id>`, also bound as the phone session's
//! `runtime_session_id`), so `session_target: main` and continued sessions keep their context:
//! Hermes' `/v1/runs` is given the conversation so far (`conversation_history`: the user's
//! requests and Hermes' replies). A tool call names its Hermes session, which leads back to
//! the phone session, its autonomy and the run in flight. The map lives in memory: after a
//! daemon restart a continued session starts a new Hermes conversation.

use std::collections::HashMap;

use serde_json::{Value, json};

/// Messages of history kept per session (the oldest dropped first).
pub const HISTORY_MESSAGES: usize = 60;

/// A Hermes run in flight for a phone session.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Run {
    pub(crate) run_id: String,
    pub(crate) phone_session_id: String,
    pub(crate) attention_id: String,
}

#[derive(Debug)]
struct Entry {
    hermes_session_id: String,
    history: Vec<Value>,
    autonomy: String,
    run: Option<Run>,
}

/// What a tool call's Hermes session leads to.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Bound {
    pub(crate) phone_session_id: String,
    pub(crate) autonomy: String,
    pub(crate) run_id: Option<String>,
}

#[derive(Debug, Default)]
pub(crate) struct Sessions {
    by_phone: HashMap<String, Entry>,
    by_hermes: HashMap<String, String>,
}

/// The Hermes session id of a phone session.
pub fn hermes_session_id(phone_session_id: &str) -> String {
    format!("openphone-{phone_session_id}")
}

impl Sessions {
    pub(crate) fn hermes_session_of(&self, phone_session_id: &str) -> Option<String> {
        self.by_phone
            .get(phone_session_id)
            .map(|e| e.hermes_session_id.clone())
    }

    /// Opens (or continues) the phone session's Hermes session for a turn at `autonomy`;
    /// returns its id and the history so far. `None` when a run is already in flight.
    pub(crate) fn open(
        &mut self,
        phone_session_id: &str,
        autonomy: &str,
    ) -> Option<(String, Vec<Value>)> {
        let entry = self
            .by_phone
            .entry(phone_session_id.to_owned())
            .or_insert_with(|| Entry {
                hermes_session_id: hermes_session_id(phone_session_id),
                history: Vec::new(),
                autonomy: autonomy.to_owned(),
                run: None,
            });
        if entry.run.is_some() {
            return None;
        }
        autonomy.clone_into(&mut entry.autonomy);
        self.by_hermes
            .insert(entry.hermes_session_id.clone(), phone_session_id.to_owned());
        Some((entry.hermes_session_id.clone(), entry.history.clone()))
    }

    pub(crate) fn set_run(&mut self, run: Run) {
        if let Some(entry) = self.by_phone.get_mut(&run.phone_session_id) {
            entry.run = Some(run);
        }
    }

    /// The run `run_id` ended: it is forgotten, and a completed one's exchange joins the
    /// history.
    pub(crate) fn finish(
        &mut self,
        phone_session_id: &str,
        run_id: &str,
        exchange: Option<(&str, &str)>,
    ) {
        let Some(entry) = self.by_phone.get_mut(phone_session_id) else {
            return;
        };
        if entry.run.as_ref().is_some_and(|r| r.run_id == run_id) {
            entry.run = None;
        }
        if let Some((user, assistant)) = exchange {
            entry.history.push(json!({"role": "user", "content": user}));
            entry
                .history
                .push(json!({"role": "assistant", "content": assistant}));
            let excess = entry.history.len().saturating_sub(HISTORY_MESSAGES);
            entry.history.drain(..excess);
        }
    }

    /// Whether `run_id` is still the session's run in flight.
    pub(crate) fn is_current(&self, phone_session_id: &str, run_id: &str) -> bool {
        self.by_phone
            .get(phone_session_id)
            .and_then(|e| e.run.as_ref())
            .is_some_and(|r| r.run_id == run_id)
    }

    pub(crate) fn take_run(&mut self, phone_session_id: &str) -> Option<Run> {
        self.by_phone.get_mut(phone_session_id)?.run.take()
    }

    pub(crate) fn drain_runs(&mut self) -> Vec<Run> {
        self.by_phone
            .values_mut()
            .filter_map(|e| e.run.take())
            .collect()
    }

    /// The phone session a Hermes session belongs to.
    pub(crate) fn bound(&self, hermes_session_id: &str) -> Option<Bound> {
        let phone = self.by_hermes.get(hermes_session_id)?;
        let entry = self.by_phone.get(phone)?;
        Some(Bound {
            phone_session_id: phone.clone(),
            autonomy: entry.autonomy.clone(),
            run_id: entry.run.as_ref().map(|r| r.run_id.clone()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_continued_session_keeps_its_history_and_one_run_at_a_time() {
        let mut s = Sessions::default();
        let (id, history) = s.open("p1", "ask_before_action").unwrap();
        assert_eq!(id, "openphone-p1");
        assert!(history.is_empty());
        s.set_run(Run {
            run_id: "r1".into(),
            phone_session_id: "p1".into(),
            attention_id: "a1".into(),
        });
        assert!(
            s.open("p1", "ask_before_action").is_none(),
            "one run at a time"
        );
        assert_eq!(
            s.bound("openphone-p1").unwrap().run_id.as_deref(),
            Some("r1")
        );
        s.finish("p1", "r1", Some(("hi", "hello")));
        let (_, history) = s.open("p1", "observe_only").unwrap();
        assert_eq!(history.len(), 2);
        assert_eq!(history[1]["content"], "hello");
        assert_eq!(s.bound("openphone-p1").unwrap().autonomy, "observe_only");
        assert!(s.bound("openphone-other").is_none());
    }
}
