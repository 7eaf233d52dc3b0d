//! One tool call as the bridge takes it: who asks ([`Caller`]), in what context ([`Context`]),
//! and the request ([`ToolRequest`]), made with one constructor per origin so a front end
//! never pairs a caller with a context by hand. [`crate::ToolBridge::call`] runs it.
//!
//! The origins: a runtime over the endpoint ([`Invocation::runtime`]), the operator
//! ([`Invocation::operator`]), an MCP host ([`Invocation::mcp_host`]), OpenClaw
//! ([`Invocation::openclaw`]), the built-in agent's foreground turn ([`Invocation::agent`]) —
//! all interactive: someone can answer a confirmation — and background work acting for its
//! creator: a job ([`Invocation::job`], [`Invocation::for_creator`]), a watcher
//! ([`Invocation::watcher`]), a goal ([`Invocation::goal`]).

use openphone_policy::{Caller, Context};
use openphone_protocol::ToolRequest;

use crate::authority::CreatorAuthority;

/// One tool call: the caller, its context and the request.
#[derive(Debug, Clone, PartialEq)]
pub struct Invocation {
    /// Who asks (its authorisation filled in by the bridge from the configuration).
    pub caller: Caller,
    /// Where the request comes from (interactive, or a background run).
    pub context: Context,
    /// The request as the origin made it.
    pub request: ToolRequest,
    /// The phone it acts on (`[[devices]] id`); `None`: the daemon's only phone.
    pub device: Option<String>,
    /// How the caller reads the result.
    pub answer: Answer,
}

/// How the caller of an [`Invocation`] reads its result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Answer {
    /// As the `result` object (what every reader of a `ToolResult` may assume).
    #[default]
    Object,
    /// As JSON text only (`ToolResult::to_json_text`): a read's result may come back text only
    /// (`ToolResult::ok_text`, when the phone kept the answer written), its `result` empty.
    /// The endpoint's `tools.invoke` answers this way.
    Text,
}

impl Invocation {
    /// The same call on the phone `device` names (`None`: the only phone; with several, a
    /// request naming none is refused with the list of ids).
    pub fn on_device(mut self, device: Option<String>) -> Invocation {
        self.device = device;
        self
    }

    /// The same call for a caller that reads the result as JSON text only ([`Answer::Text`]).
    pub fn answered_as_text(mut self) -> Invocation {
        self.answer = Answer::Text;
        self
    }

    fn interactive(caller: &Caller, request: ToolRequest) -> Invocation {
        Invocation {
            caller: caller.clone(),
            context: Context::Interactive,
            request,
            device: None,
            answer: Answer::Object,
        }
    }

    /// A connected runtime's call over the endpoint (`tools.invoke`, the screen an attention
    /// request attaches).
    pub fn runtime(caller: &Caller, request: ToolRequest) -> Invocation {
        Invocation::interactive(caller, request)
    }

    /// The user's own call (the operator's credential: CLI, dashboard).
    pub fn operator(caller: &Caller, request: ToolRequest) -> Invocation {
        Invocation::interactive(caller, request)
    }

    /// An MCP host's `tools/call`.
    pub fn mcp_host(caller: &Caller, request: ToolRequest) -> Invocation {
        Invocation::interactive(caller, request)
    }

    /// An OpenClaw agent's or operator's `node.invoke`.
    pub fn openclaw(caller: &Caller, request: ToolRequest) -> Invocation {
        Invocation::interactive(caller, request)
    }

    /// The built-in agent's foreground turn (a phone session with the user present).
    pub fn agent(caller: &Caller, request: ToolRequest) -> Invocation {
        Invocation::interactive(caller, request)
    }

    /// A background job's call, run as `caller` (`builtin`), acting for the runtime
    /// `on_behalf_of` (`None`: the user's own job).
    pub fn job(
        caller: &Caller,
        job_id: u64,
        on_behalf_of: Option<&str>,
        request: ToolRequest,
    ) -> Invocation {
        Invocation {
            caller: caller.clone(),
            context: Context::job_for(job_id, on_behalf_of),
            request,
            device: None,
            answer: Answer::Object,
        }
    }

    /// A background job's call with its creator's authority (`builtin` narrowed to the
    /// creator, in a context naming it): what a job a watcher or a runtime made runs with.
    pub fn for_creator(
        authority: &CreatorAuthority,
        job_id: u64,
        request: ToolRequest,
    ) -> Invocation {
        Invocation {
            caller: authority.caller().clone(),
            context: authority.job_context(job_id),
            request,
            device: None,
            answer: Answer::Object,
        }
    }

    /// A watcher's own call (its check or its reaction).
    pub fn watcher(caller: &Caller, watcher_id: i64, request: ToolRequest) -> Invocation {
        Invocation {
            caller: caller.clone(),
            context: Context::watcher(watcher_id),
            request,
            device: None,
            answer: Answer::Object,
        }
    }

    /// A goal's step that needs the user's approval: its durable confirmation is opened in the
    /// interactive context, so the user can answer it.
    pub fn goal_approval(caller: &Caller, request: ToolRequest) -> Invocation {
        Invocation::interactive(caller, request)
    }

    /// A goal's step or check.
    pub fn goal(caller: &Caller, goal_id: &str, request: ToolRequest) -> Invocation {
        Invocation {
            caller: caller.clone(),
            context: Context::goal(goal_id),
            request,
            device: None,
            answer: Answer::Object,
        }
    }
}
