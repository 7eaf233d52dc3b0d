//! What the crash test asked for and what it was told: every logical call (one idempotency
//! key, one memory text), the answer it was acknowledged with, and the checks of the
//! invariants against the database afterwards.

use std::collections::{HashMap, HashSet};

use openphone_protocol::{ErrorCode, ToolResult, ToolStatus};
use openphone_store::{AuditConfirmation, AuditKind, ConfirmationState, PolicyDecision, Store};
use serde::Serialize;

/// How a call reaches execution.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Path {
    /// The operator's own invoke at `trusted_actions`: runs without a confirmation.
    DirectOperator,
    /// A runtime at `trusted_actions` (its ceiling raised by the config): runs directly.
    DirectRuntime,
    /// A runtime at `ask_before_action`: a confirmation the operator then approves or denies.
    Confirmed,
}

/// The user's decision on a confirmed call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    Approve,
    Deny,
}

/// A final answer, reduced to what must survive: status, code and the saved memory's id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Outcome {
    pub status: ToolStatus,
    pub code: Option<ErrorCode>,
    pub memory_id: Option<i64>,
}

impl Outcome {
    pub fn of(result: &ToolResult) -> Outcome {
        Outcome {
            status: result.status,
            code: result.error.as_ref().map(|e| e.code),
            memory_id: result
                .result
                .get("memory")
                .and_then(|m| m.get("memory_id"))
                .and_then(serde_json::Value::as_i64),
        }
    }
}

/// One logical call: retried with its key until it has a final answer.
#[derive(Debug, Clone)]
pub struct Call {
    pub index: usize,
    pub path: Path,
    pub key: String,
    pub text: String,
    pub decision: Option<Decision>,
    /// The confirmation the runtime was pointed at, once known.
    pub confirmation_id: Option<String>,
    /// The first final answer received.
    pub acknowledged: Option<Outcome>,
    /// Taken by a worker in the current cycle.
    pub claimed: bool,
    /// Sent (at least once) to a daemon that was then killed before answering.
    pub cut_by_kill: bool,
}

/// Every call of a run.
#[derive(Debug, Default)]
pub struct Ledger {
    pub calls: Vec<Call>,
    pub prefix: String,
    /// Request ids of the safe reads (`screen.get`) answered `ok`: each answer was given
    /// once its audit record was in the write-ahead log, so each must survive the kill.
    pub reads: Vec<String>,
}

impl Ledger {
    pub fn new(prefix: String) -> Ledger {
        Ledger {
            calls: Vec::new(),
            prefix,
            reads: Vec::new(),
        }
    }

    /// An unanswered call nobody works on this cycle (a retry), if any.
    pub fn claim_retry(&mut self) -> Option<Call> {
        let call = self
            .calls
            .iter_mut()
            .find(|c| c.acknowledged.is_none() && !c.claimed)?;
        call.claimed = true;
        Some(call.clone())
    }

    /// A new call on `path`, claimed.
    pub fn add(&mut self, path: Path, decision: Option<Decision>) -> Call {
        let index = self.calls.len();
        let call = Call {
            index,
            path,
            key: format!("{}-key-{index}", self.prefix),
            text: format!("{} memory {index}", self.prefix),
            decision,
            confirmation_id: None,
            acknowledged: None,
            claimed: true,
            cut_by_kill: false,
        };
        self.calls.push(call.clone());
        call
    }

    pub fn set_confirmation(&mut self, index: usize, id: &str) {
        self.calls[index].confirmation_id = Some(id.to_owned());
    }

    pub fn acknowledge(&mut self, index: usize, outcome: Outcome) {
        let call = &mut self.calls[index];
        if call.acknowledged.is_none() {
            call.acknowledged = Some(outcome);
        }
    }

    /// After a kill: every claim is released; those still unanswered were cut by it.
    pub fn after_kill(&mut self) -> usize {
        let mut cut = 0;
        for call in &mut self.calls {
            if call.claimed && call.acknowledged.is_none() {
                call.cut_by_kill = true;
                cut += 1;
            }
            call.claimed = false;
        }
        cut
    }

    /// Releases every claim (between rounds without a kill).
    pub fn release(&mut self) {
        for call in &mut self.calls {
            call.claimed = false;
        }
    }

    pub fn unanswered(&self) -> usize {
        self.calls
            .iter()
            .filter(|c| c.acknowledged.is_none())
            .count()
    }
}

/// The invariants, counted (each must be 0), and what the run did.
#[derive(Debug, Default, Serialize)]
pub struct Findings {
    /// An acknowledged final answer that a keyed retry did not give back unchanged, or an
    /// acknowledged saved memory that is not in the database.
    pub lost_acknowledged_results: usize,
    /// A call whose memory was saved more than once.
    pub double_executions: usize,
    /// A confirmed call that ran though the user denied it (or never approved it).
    pub unapproved_executions: usize,
    /// A call that ran without an audit record of its attempt (direct) or of its approval.
    pub unaudited_executions: usize,
    /// Executing records or approved confirmations left without an outcome at the end.
    pub unsettled_records: usize,
    /// A safe read answered `ok` whose audit record is not in the log after the kills (its
    /// promise: durable against a crash of the process, docs/security.md).
    pub lost_read_records: usize,
    /// Safe reads answered `ok` (their records checked).
    pub reads_answered: usize,
    /// `audit verify` over the whole chain.
    pub audit_chain_intact: bool,
    pub audit_records: usize,
    pub memories_saved: usize,
    /// Calls whose final answer is `execution_result_unknown` (a kill inside the execution).
    pub result_unknown: usize,
    /// Calls the user approved / denied.
    pub approved: usize,
    pub denied: usize,
    /// Examples, for a failing run.
    pub problems: Vec<String>,
}

impl Findings {
    pub fn holds(&self) -> bool {
        self.lost_acknowledged_results == 0
            && self.double_executions == 0
            && self.unapproved_executions == 0
            && self.unaudited_executions == 0
            && self.unsettled_records == 0
            && self.lost_read_records == 0
            && self.audit_chain_intact
    }

    fn problem(&mut self, text: String) {
        if self.problems.len() < 20 {
            self.problems.push(text);
        }
    }

    /// A keyed retry at the end answered `replay` for an acknowledged call.
    pub fn check_replay(&mut self, call: &Call, replay: &ToolResult) {
        let Some(acknowledged) = &call.acknowledged else {
            return;
        };
        let again = Outcome::of(replay);
        if !replay.replayed || &again != acknowledged {
            self.lost_acknowledged_results += 1;
            self.problem(format!(
                "call {} ({:?}): acknowledged {acknowledged:?}, a keyed retry answered {again:?} \
                 (replayed: {})",
                call.index, call.path, replay.replayed
            ));
        }
    }

    /// The database after the run, against the ledger.
    pub fn check_store(&mut self, store: &Store, ledger: &Ledger) -> anyhow::Result<()> {
        let memories = store.search_memory(None, usize::MAX >> 1)?;
        self.memories_saved = memories.len();
        let mut saved: HashMap<&str, Vec<i64>> = HashMap::new();
        for hit in &memories {
            saved
                .entry(hit.memory.text.as_str())
                .or_default()
                .push(hit.memory.memory_id);
        }
        let mut attempts: HashSet<String> = HashSet::new();
        let mut approvals: HashSet<String> = HashSet::new();
        let mut read_records: HashSet<String> = HashSet::new();
        for record in store.audit_iter(0, 1000) {
            let entry = record?.entry;
            self.audit_records += 1;
            if entry.kind == AuditKind::ToolRequest && entry.mutating == Some(false) {
                read_records.insert(entry.request_id.clone());
            }
            let Some(key) = entry.idempotency_key.clone() else {
                continue;
            };
            match entry.kind {
                AuditKind::ToolRequest
                    if entry.decision == Some(PolicyDecision::Allow)
                        && entry.mutating == Some(true)
                        && entry.status.is_none() =>
                {
                    attempts.insert(key);
                }
                AuditKind::ConfirmationTransition
                    if entry.confirmation == Some(AuditConfirmation::Approved) =>
                {
                    approvals.insert(key);
                }
                AuditKind::ToolRequest
                | AuditKind::ConfirmationTransition
                | AuditKind::BackgroundEvent
                | AuditKind::OperatorAction => {}
            }
        }
        for call in &ledger.calls {
            let ids = saved.get(call.text.as_str()).cloned().unwrap_or_default();
            if ids.len() > 1 {
                self.double_executions += 1;
                self.problem(format!("call {} ran {} times", call.index, ids.len()));
            }
            let ran = !ids.is_empty();
            if call.path == Path::Confirmed && ran && call.decision != Some(Decision::Approve) {
                self.unapproved_executions += 1;
                self.problem(format!("call {} ran without approval", call.index));
            }
            let audited = match call.path {
                Path::DirectOperator | Path::DirectRuntime => attempts.contains(&call.key),
                Path::Confirmed => approvals.contains(&call.key),
            };
            if ran && !audited {
                self.unaudited_executions += 1;
                self.problem(format!(
                    "call {} ran with no audit record first",
                    call.index
                ));
            }
            if let Some(Outcome {
                status: ToolStatus::Ok,
                memory_id,
                ..
            }) = &call.acknowledged
                && memory_id.is_none_or(|id| !ids.contains(&id))
            {
                self.lost_acknowledged_results += 1;
                self.problem(format!(
                    "call {} was acknowledged ok but its memory {memory_id:?} is not there",
                    call.index
                ));
            }
            if call.acknowledged.as_ref().and_then(|o| o.code)
                == Some(ErrorCode::ExecutionResultUnknown)
            {
                self.result_unknown += 1;
            }
            match call.decision {
                Some(Decision::Approve) => self.approved += 1,
                Some(Decision::Deny) => self.denied += 1,
                None => {}
            }
        }
        self.reads_answered = ledger.reads.len();
        for request_id in &ledger.reads {
            if !read_records.contains(request_id) {
                self.lost_read_records += 1;
                self.problem(format!(
                    "the safe read {request_id} was answered but its audit record is gone"
                ));
            }
        }
        let executing = match store.list_executions() {
            Ok(left) => left.len(),
            // A database written by an older daemon (`--daemon`) has no executing records.
            Err(_) if store.schema_version()? < openphone_store::SCHEMA_VERSION => 0,
            Err(e) => return Err(e.into()),
        };
        self.unsettled_records = executing
            + store
                .list_confirmations(&openphone_store::ConfirmationFilter {
                    state: Some(ConfirmationState::Approved),
                    ..Default::default()
                })?
                .len();
        self.audit_chain_intact = store.verify_audit()?.is_intact();
        Ok(())
    }
}
