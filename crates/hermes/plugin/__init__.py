"""OpenPhone's phone tools inside Hermes Agent.

Written into $HERMES_HOME/plugins/openphone/ by the openphone daemon's Hermes adapter
(crates/hermes); rewritten at every daemon start, so edits here are lost. It registers one
Hermes tool per phone tool listed in tools.json and sends each call to the daemon's loopback
tool endpoint named in endpoint.json, with the Hermes session id and the model's tool-call id,
so the call runs through OpenPhone's ToolBridge in the phone session that asked Hermes and a
retried call is recognised. Standard library only.
"""

import json
import os
import urllib.error
import urllib.request

_HERE = os.path.dirname(os.path.abspath(__file__))
_TOOLSET = "openphone"
# Long enough for the user to decide on the phone; the daemon answers before this.
_CALL_TIMEOUT_S = 900
_names = set()


def _endpoint():
    with open(os.path.join(_HERE, "endpoint.json"), encoding="utf-8") as f:
        return json.load(f)


def _call(tool, args, session_id, tool_call_id, api_request_id=""):
    try:
        endpoint = _endpoint()
    except (OSError, ValueError) as e:
        return json.dumps({"error": "the OpenPhone daemon's endpoint is unknown (%s); is the daemon running?" % e})
    body = json.dumps({
        "tool": tool,
        "arguments": args if isinstance(args, dict) else {},
        "session_id": session_id or "",
        "tool_call_id": tool_call_id or "",
        "api_request_id": api_request_id or "",
    }).encode("utf-8")
    request = urllib.request.Request(
        endpoint["url"],
        data=body,
        method="POST",
        headers={
            "Content-Type": "application/json",
            "Authorization": "Bearer " + endpoint["token"],
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=_CALL_TIMEOUT_S) as reply:
            return reply.read().decode("utf-8")
    except urllib.error.HTTPError as e:
        text = e.read().decode("utf-8", "replace")
        return json.dumps({"error": "OpenPhone answered HTTP %d: %s" % (e.code, text[:2000])})
    except (urllib.error.URLError, OSError) as e:
        return json.dumps({"error": "the OpenPhone daemon could not be reached: %s" % e})


def _handler_for(tool):
    # Reached only when Hermes runs a tool without its execution middleware: no tool-call id.
    def handler(args, **kwargs):
        return _call(tool, args, kwargs.get("session_id", ""), "")

    return handler


def _middleware(tool_name="", args=None, next_call=None, session_id="", tool_call_id="",
                api_request_id="", **_):
    # Hermes passes the model's tool-call id and the id of the model response it came in
    # (`<turn>:api:<n>`) to execution middleware, not to tool handlers.
    if tool_name in _names:
        return _call(tool_name, args or {}, session_id, tool_call_id, api_request_id)
    return next_call(args)


def register(ctx):
    with open(os.path.join(_HERE, "tools.json"), encoding="utf-8") as f:
        tools = json.load(f)
    for tool in tools:
        name = tool["name"]
        _names.add(name)
        ctx.register_tool(
            name=name,
            toolset=_TOOLSET,
            schema={
                "name": name,
                "description": tool["description"],
                "parameters": tool["parameters"],
            },
            handler=_handler_for(name),
            description=tool["description"],
        )
    ctx.register_middleware("tool_execution", _middleware)
