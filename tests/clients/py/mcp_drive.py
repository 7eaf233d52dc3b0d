#!/usr/bin/env python3
"""Drive an MCP server with the real Python `mcp` client SDK (pinned 2.3.0).

Used by the Rust integration tests (docs/spec/mcp.md §12.3). Install the SDK
with `tests/clients/py/install.sh` and run this file with `.cache/mcp-py/bin/python`.

Contract:
  * exactly one JSON object is printed, as the LAST line of stdout; every log line
    goes to stderr (the stdio server's own stderr is passed through to ours);
  * exit 0 when the client ran fine (also when a tool result has isError: true),
    2 on a usage error, 1 on any client/protocol exception; in that case the last
    line is {"exception": <type>, "message": <str>, "code"?: <JSON-RPC code>, "data"?: ...}.
  * over HTTP every non-2xx response is listed in "http_errors" ([{method, status,
    mcp_method, www_authenticate?}]): the SDK itself maps e.g. a bare 401/403 to
    JSON-RPC -32603 "Server returned an error response" and drops the status.

SDK facts this relies on (mcp 2.3.0):
  * Client(server, mode=..., elicitation_callback=..., client_info=..., read_timeout_seconds=...):
    mode "legacy" = initialize handshake; "auto" = server/discover probe, falls back to
    initialize on any JSON-RPC/HTTP error; "2026-07-28" = adopt modern with no wire traffic.
  * passing any elicitation_callback makes the client declare elicitation {form:{}, url:{}}
    (not configurable; --elicit-caps overrides it through a private hook, test knob only);
    without a callback it declares no elicitation and answers elicitation/create with -32600.
  * the same callback answers legacy elicitation/create and every input_required round
    (Client.call_tool retries automatically, up to 10 rounds, with a new JSON-RPC id).
  * call_tool(meta=...) becomes params._meta; a progress_callback makes the SDK add
    _meta.progressToken = the request's JSON-RPC id.

Examples:
  mcp_drive.py --transport stdio --server "/path/openphone --data-dir D mcp serve" --mode legacy --list
  mcp_drive.py --transport http --url http://127.0.0.1:4123/mcp --token T --mode auto \
      --answer accept --call openphone_ui_tap --args '{"x":1,"y":2,"reason":"t"}' --key k1 --progress
  mcp_drive.py ... --sequence steps.json     # several actions over ONE connection

Sequence file: a JSON list of steps, each an object with "action":
  {"action": "list"}
  {"action": "call", "name": N, "args": {...}, "key": K?, "progress": bool?, "timeout_s": S?,
   "answer": "accept|decline|cancel"?,               # overrides --answer from this step on
   "until": {"pointer": "/structured/state", "in": ["completed", "denied"]}?,  # repeat the call
   "max_tries": 20?, "interval_s": 0.5?}
  {"action": "raw", "method": M, "params": {...}?, "timeout_s": S?}
  {"action": "sleep", "seconds": S}
  {"action": "exec", "argv": [...], "timeout_s": S?}  # e.g. ["openphone", "confirm", "approve",
                                                       #  "{confirmation_id}", "--data-dir", D]
  In "args", "params", "key" and "argv" every "{confirmation_id}" is replaced by the most recent
  confirmation id seen in a tool result (_meta["dev.openphone/toolResult"].confirmation_id).
  Output: {"connection": {...}, "steps": [<per-step output>]}. A failing step records
  {"exception": ...} and the run goes on; the exit code is then 1.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shlex
import subprocess
import sys
import traceback
from typing import Any, NoReturn

log = logging.getLogger("mcp_drive")

IDEMPOTENCY_META_KEY = "dev.openphone/idempotencyKey"
TOOL_RESULT_META_KEY = "dev.openphone/toolResult"
MODES = {"legacy": "legacy", "auto": "auto", "modern": "2026-07-28"}
ANSWERS = ("accept", "decline", "cancel", "none")


# --------------------------------------------------------------------------- output helpers


def emit(obj: dict[str, Any]) -> None:
    """Print the single result line (last line of stdout)."""
    sys.stdout.flush()
    sys.stdout.write(json.dumps(obj, default=_json_default, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def _json_default(o: Any) -> Any:
    dump = getattr(o, "model_dump", None)
    if callable(dump):
        return dump(by_alias=True, mode="json", exclude_none=True)
    return repr(o)


def _dump(model: Any) -> Any:
    if model is None:
        return None
    dump = getattr(model, "model_dump", None)
    if callable(dump):
        return dump(by_alias=True, mode="json", exclude_none=True)
    return model


def usage_error(msg: str) -> NoReturn:
    print(f"usage error: {msg}", file=sys.stderr)
    emit({"exception": "UsageError", "message": msg})
    sys.exit(2)


def leaf_exception(exc: BaseException) -> BaseException:
    """anyio wraps failures in (nested) ExceptionGroups; report the first real one."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def describe_exception(exc: BaseException) -> dict[str, Any]:
    exc = leaf_exception(exc)
    out: dict[str, Any] = {"exception": type(exc).__name__, "message": str(exc)}
    err = getattr(exc, "error", None)  # mcp.shared.exceptions.MCPError carries ErrorData
    code = getattr(err, "code", None)
    if isinstance(code, int):
        out["code"] = code
        out["message"] = getattr(err, "message", out["message"])
        data = getattr(err, "data", None)
        if data is not None:
            out["data"] = _dump(data)
    return out


# --------------------------------------------------------------------------- CLI


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # argparse's own usage errors
        self.print_usage(sys.stderr)
        usage_error(message)


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = _Parser(description="Drive an MCP server with the Python mcp SDK (2.3.0).")
    p.add_argument("--transport", choices=("stdio", "http"), required=True)
    p.add_argument("--server", help="stdio: server command line (split with shlex)")
    p.add_argument("--url", help="http: MCP endpoint URL")
    p.add_argument("--token", help="http: bearer token (Authorization: Bearer <token>)")
    p.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="NAME: VALUE",
        help="http: extra header on every request (repeatable), e.g. 'Origin: http://x'",
    )
    p.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="K=V",
        help="stdio: extra environment variable for the server process (repeatable)",
    )
    p.add_argument(
        "--inherit-env",
        action="store_true",
        help="stdio: pass our whole environment to the server (SDK default passes only HOME, PATH, ...)",
    )
    p.add_argument("--mode", choices=tuple(MODES), default="auto", help="modern = pin 2026-07-28")
    p.add_argument("--answer", choices=ANSWERS, default="none")
    p.add_argument(
        "--content",
        help="JSON object sent as ElicitResult.content on accept (default: {} plus schema defaults)",
    )
    p.add_argument(
        "--elicit-url",
        action="store_true",
        help="declare URL-mode elicitation (the SDK always declares form+url when a callback is set, "
        "so this only matters together with --elicit-caps)",
    )
    p.add_argument(
        "--elicit-caps",
        choices=("sdk", "form", "empty"),
        default="sdk",
        help="override the declared elicitation capability: sdk = SDK default {form:{},url:{}}; "
        "form = {form:{}} (+url with --elicit-url); empty = {} (the 2025-06-18 spelling)",
    )
    p.add_argument("--client-name", default="openphone-mcp-drive")
    p.add_argument("--client-version", default="0.1.0")
    p.add_argument(
        "--timeout-s", type=float, default=60.0, help="read timeout of each tools/call round (and raw request)"
    )
    p.add_argument(
        "--read-timeout-s", type=float, default=60.0, help="session read timeout for every other request"
    )
    p.add_argument("--overall-timeout-s", type=float, default=180.0, help="hard cap for the whole run")
    p.add_argument("--max-rounds", type=int, default=None, help="input_required_max_rounds (SDK default 10)")
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging to stderr")

    act = p.add_mutually_exclusive_group(required=True)
    act.add_argument("--list", action="store_true", help="list tools")
    act.add_argument("--call", metavar="NAME", help="call a tool")
    act.add_argument("--call-raw", metavar="METHOD", help="send one raw request (params from --args)")
    act.add_argument("--sequence", metavar="FILE", help="JSON list of steps over one connection")

    p.add_argument("--args", default=None, help="JSON object: tool arguments / raw params")
    p.add_argument("--key", default=None, help="idempotency key: _meta['dev.openphone/idempotencyKey']")
    p.add_argument("--progress", action="store_true", help="send a progressToken, record notifications")

    ns = p.parse_args(argv)

    if ns.transport == "stdio":
        if not ns.server:
            usage_error("--transport stdio needs --server CMD")
        try:
            ns.server_argv = shlex.split(ns.server)
        except ValueError as e:
            usage_error(f"--server: {e}")
        if not ns.server_argv:
            usage_error("--server is empty")
    else:
        if not ns.url:
            usage_error("--transport http needs --url URL")
    ns.extra_headers = {}
    for h in ns.header:
        name, sep, value = h.partition(":")
        if not sep or not name.strip():
            usage_error(f"--header {h!r}: expected 'NAME: VALUE'")
        ns.extra_headers[name.strip()] = value.strip()
    ns.extra_env = {}
    for kv in ns.env:
        k, sep, v = kv.partition("=")
        if not sep or not k:
            usage_error(f"--env {kv!r}: expected K=V")
        ns.extra_env[k] = v

    ns.args_obj = None
    if ns.args is not None:
        try:
            ns.args_obj = json.loads(ns.args)
        except json.JSONDecodeError as e:
            usage_error(f"--args is not JSON: {e}")
        if ns.call and not isinstance(ns.args_obj, dict):
            # Sent as-is anyway would be rejected by the SDK's own model; keep it a usage error.
            usage_error("--args must be a JSON object")
    ns.content_obj = None
    if ns.content is not None:
        try:
            ns.content_obj = json.loads(ns.content)
        except json.JSONDecodeError as e:
            usage_error(f"--content is not JSON: {e}")
        if not isinstance(ns.content_obj, dict):
            usage_error("--content must be a JSON object")
    ns.steps = None
    if ns.sequence:
        try:
            with open(ns.sequence, encoding="utf-8") as f:
                ns.steps = json.load(f)
        except (OSError, json.JSONDecodeError) as e:
            usage_error(f"--sequence {ns.sequence}: {e}")
        if not isinstance(ns.steps, list) or not all(isinstance(s, dict) and "action" in s for s in ns.steps):
            usage_error("--sequence must hold a JSON list of objects with an 'action'")
        for s in ns.steps:
            if s["action"] not in ("list", "call", "raw", "sleep", "exec"):
                usage_error(f"unknown sequence action {s['action']!r}")
            if s["action"] == "call" and not isinstance(s.get("name"), str):
                usage_error("sequence 'call' step needs a string 'name'")
            if s["action"] == "raw" and not isinstance(s.get("method"), str):
                usage_error("sequence 'raw' step needs a string 'method'")
            if s.get("answer") is not None and s["answer"] not in ANSWERS[:3]:
                usage_error(f"sequence step answer must be accept|decline|cancel, got {s['answer']!r}")
            if s.get("answer") is not None and ns.answer == "none":
                usage_error("a step 'answer' needs an elicitation callback: pass --answer accept|decline|cancel")
    if ns.answer == "none" and ns.elicit_caps != "sdk":
        usage_error("--elicit-caps needs an elicitation callback (--answer accept|decline|cancel)")
    return ns


# --------------------------------------------------------------------------- the driver


class Driver:
    def __init__(self, ns: argparse.Namespace) -> None:
        self.ns = ns
        self.answer = ns.answer
        self.elicitations: list[dict[str, Any]] = []
        self.progress: list[dict[str, Any]] = []
        self.confirmation_id: str | None = None
        self.client: Any = None
        # http: every non-2xx response seen (the SDK turns e.g. a bare 401 into -32603 and drops the status)
        self.http_errors: list[dict[str, Any]] = []

    # -- callbacks

    async def on_elicit(self, context: Any, params: Any) -> Any:
        import mcp_types as types

        mode = getattr(params, "mode", None) or "form"
        rec: dict[str, Any] = {
            "mode": mode,
            "message": getattr(params, "message", None),
            "url": getattr(params, "url", None),
            "elicitation_id": getattr(params, "elicitation_id", None),
            "requested_schema": getattr(params, "requested_schema", None),
            # legacy elicitation/create: the JSON-RPC id (an int); input_required: the inputRequests key
            "request_id": getattr(context, "request_id", None),
            "protocol_version": self._protocol_version(),
        }
        if mode == "url":
            action = "accept"  # the user "opened the URL"
        else:
            action = self.answer
        rec["answered"] = action
        self.elicitations.append(rec)
        log.info("elicitation (%s): %r -> %s", mode, rec["message"], action)
        if action == "accept" and mode != "url":
            return types.ElicitResult(action="accept", content=self._accept_content(rec["requested_schema"]))
        return types.ElicitResult(action=action)

    def _accept_content(self, schema: Any) -> dict[str, Any]:
        content: dict[str, Any] = {}
        props = schema.get("properties") if isinstance(schema, dict) else None
        if isinstance(props, dict):
            for name, prop in props.items():
                if isinstance(prop, dict) and "default" in prop:
                    content[name] = prop["default"]
        if self.ns.content_obj:
            content.update(self.ns.content_obj)
        return content

    async def on_progress(self, progress: float, total: float | None, message: str | None) -> None:
        self.progress.append({"progress": progress, "total": total, "message": message})

    def _protocol_version(self) -> str | None:
        try:
            return self.client.session.protocol_version if self.client is not None else None
        except RuntimeError:
            return None

    # -- connection

    def build_client(self, transport: Any) -> Any:
        from mcp import Implementation
        from mcp.client import Client

        ns = self.ns
        kwargs: dict[str, Any] = {
            "mode": MODES[ns.mode],
            "read_timeout_seconds": ns.read_timeout_s,
            "client_info": Implementation(name=ns.client_name, version=ns.client_version),
        }
        if ns.answer != "none":
            kwargs["elicitation_callback"] = self.on_elicit
        if ns.max_rounds is not None:
            kwargs["input_required_max_rounds"] = ns.max_rounds

        caps = ns.elicit_caps
        if caps == "sdk":
            return Client(transport, **kwargs)

        want_url = ns.elicit_url

        class _CapsClient(Client):
            """Client whose declared elicitation capability is overridden (test knob only)."""

            async def _build_session(self, exit_stack):  # type: ignore[override]
                import mcp_types as types

                session = await super()._build_session(exit_stack)
                original = session._build_capabilities

                def build(version: str) -> Any:
                    c = original(version)
                    if c.elicitation is not None:
                        if caps == "empty":
                            c.elicitation = types.ElicitationCapability()
                        else:
                            c.elicitation = types.ElicitationCapability(
                                form=types.FormElicitationCapability(),
                                url=types.UrlElicitationCapability() if want_url else None,
                            )
                    return c

                session._build_capabilities = build
                return session

        return _CapsClient(transport, **kwargs)

    def connection_info(self) -> dict[str, Any]:
        c = self.client
        s = c.session
        info = c.server_info
        init = s.initialize_result
        disc = s.discover_result
        return {
            "protocol_version": c.protocol_version,
            "era": "modern" if disc is not None else "legacy",
            "server_name": getattr(info, "name", None),
            "server_version": getattr(info, "version", None),
            "server_title": getattr(info, "title", None),
            "instructions": c.instructions,
            "capabilities": _dump(c.server_capabilities),
            "handshake_meta": _dump((init or disc).meta) if (init or disc) is not None else None,
            "supported_versions": list(disc.supported_versions) if disc is not None else None,
        }

    # -- actions

    async def do_list(self) -> dict[str, Any]:
        res = await self.client.list_tools(cache_mode="refresh")
        tools = []
        for t in res.tools:
            tools.append(
                {
                    "name": t.name,
                    "title": t.title,
                    "description": t.description,
                    "annotations": _dump(t.annotations),
                    "meta": t.meta,
                    "input_schema": t.input_schema,
                    "output_schema": t.output_schema,
                }
            )
        return {"tools": tools, "next_cursor": res.next_cursor, "result_meta": res.meta}

    async def do_call(
        self,
        name: str,
        args: dict[str, Any] | None,
        key: str | None,
        progress: bool,
        timeout_s: float | None,
    ) -> dict[str, Any]:
        import anyio

        self.elicitations = []
        self.progress = []
        meta: dict[str, Any] | None = {IDEMPOTENCY_META_KEY: key} if key is not None else None
        res = await self.client.call_tool(
            name,
            args,
            read_timeout_seconds=timeout_s,
            progress_callback=self.on_progress if progress else None,
            meta=meta,
        )
        # Progress callbacks run in spawned tasks; let any still queued finish.
        for _ in range(5):
            await anyio.sleep(0.02)
        texts, images = [], []
        for block in res.content:
            btype = getattr(block, "type", None)
            if btype == "text":
                texts.append(block.text)
            elif btype == "image":
                images.append({"mime_type": block.mime_type, "base64_len": len(block.data)})
        out = {
            "is_error": bool(res.is_error),
            "structured": res.structured_content,
            "texts": texts,
            "images": images,
            "meta": res.meta,
            "progress": list(self.progress),
            "elicitations": list(self.elicitations),
        }
        tr = (res.meta or {}).get(TOOL_RESULT_META_KEY)
        if isinstance(tr, dict) and isinstance(tr.get("confirmation_id"), str):
            self.confirmation_id = tr["confirmation_id"]
        return out

    async def do_raw(self, method: str, params: Any, timeout_s: float | None) -> dict[str, Any]:
        import mcp_types as types
        from pydantic import TypeAdapter

        req = types.Request[Any, str](method=method, params=params)
        raw = await self.client.session.send_request(
            req, TypeAdapter(dict[str, Any]), request_read_timeout_seconds=timeout_s
        )
        return {"result": raw}

    # -- sequence

    def _subst(self, value: Any) -> Any:
        if isinstance(value, str):
            if "{confirmation_id}" in value:
                if self.confirmation_id is None:
                    raise RuntimeError("step uses {confirmation_id} but no tool result carried one yet")
                return value.replace("{confirmation_id}", self.confirmation_id)
            return value
        if isinstance(value, list):
            return [self._subst(v) for v in value]
        if isinstance(value, dict):
            return {k: self._subst(v) for k, v in value.items()}
        return value

    async def run_step(self, step: dict[str, Any]) -> dict[str, Any]:
        import anyio

        action = step["action"]
        if action == "list":
            return await self.do_list()
        if action == "sleep":
            await anyio.sleep(float(step.get("seconds", 0)))
            return {"slept": float(step.get("seconds", 0))}
        if action == "exec":
            argv = self._subst(step["argv"])
            with anyio.fail_after(float(step.get("timeout_s", 30))):
                proc = await anyio.run_process(argv, check=False, stderr=subprocess.PIPE)
            return {
                "argv": argv,
                "returncode": proc.returncode,
                "stdout": proc.stdout.decode(errors="replace"),
                "stderr": proc.stderr.decode(errors="replace"),
            }
        if action == "raw":
            return await self.do_raw(step["method"], self._subst(step.get("params")), step.get("timeout_s"))
        # call
        if step.get("answer") is not None:
            self.answer = step["answer"]
        until = step.get("until")
        tries = int(step.get("max_tries", 20)) if until else 1
        out: dict[str, Any] = {}
        for attempt in range(1, tries + 1):
            out = await self.do_call(
                step["name"],
                self._subst(step.get("args")),
                self._subst(step.get("key")),
                bool(step.get("progress", False)),
                step.get("timeout_s", self.ns.timeout_s),
            )
            out["tries"] = attempt
            if not until:
                break
            got = _pointer(out, until.get("pointer", ""))
            if got in until.get("in", []):
                break
            if attempt < tries:
                await anyio.sleep(float(step.get("interval_s", 0.5)))
        return out

    async def run(self) -> tuple[dict[str, Any], bool]:
        ns = self.ns
        if ns.transport == "stdio":
            from mcp.client.stdio import StdioServerParameters, get_default_environment

            env = dict(os.environ) if ns.inherit_env else get_default_environment()
            env.update(ns.extra_env)
            transport = StdioServerParameters(command=ns.server_argv[0], args=ns.server_argv[1:], env=env)
            return await self._run_with(transport)

        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        headers = dict(ns.extra_headers)
        if ns.token is not None:
            headers["Authorization"] = f"Bearer {ns.token}"
        # Same timeouts as the SDK's own default client (30 s, 300 s read for SSE streams).

        async def on_response(response: Any) -> None:
            if response.status_code >= 300:
                rec = {
                    "method": response.request.method,
                    "status": response.status_code,
                    "mcp_method": response.request.headers.get("mcp-method"),
                }
                if "www-authenticate" in response.headers:
                    rec["www_authenticate"] = response.headers["www-authenticate"]
                self.http_errors.append(rec)

        async with httpx2.AsyncClient(
            headers=headers,
            timeout=httpx2.Timeout(30.0, read=300.0),
            event_hooks={"response": [on_response]},
        ) as http:
            return await self._run_with(streamable_http_client(ns.url, http_client=http))

    async def _run_with(self, transport: Any) -> tuple[dict[str, Any], bool]:
        ns = self.ns
        self.client = self.build_client(transport)
        async with self.client:
            conn = self.connection_info()
            log.info("connected: %s", conn)
            if ns.list:
                out = await self.do_list()
                out.update(
                    server_name=conn["server_name"],
                    server_version=conn["server_version"],
                    protocol_version=conn["protocol_version"],
                    connection=conn,
                )
                return out, True
            if ns.call:
                out = await self.do_call(ns.call, ns.args_obj, ns.key, ns.progress, ns.timeout_s)
                out["protocol_version"] = conn["protocol_version"]
                out["connection"] = conn
                return out, True
            if ns.call_raw:
                out = await self.do_raw(ns.call_raw, ns.args_obj, ns.timeout_s)
                out["connection"] = conn
                return out, True
            steps_out: list[dict[str, Any]] = []
            ok = True
            for i, step in enumerate(ns.steps):
                try:
                    res = await self.run_step(step)
                except Exception as e:  # noqa: BLE001 - recorded per step
                    log.error("step %d (%s) failed:\n%s", i, step.get("action"), traceback.format_exc())
                    res = describe_exception(e)
                    ok = False
                res["step"] = i
                res["action"] = step["action"]
                steps_out.append(res)
            return {"connection": conn, "steps": steps_out}, ok


def _pointer(doc: Any, pointer: str) -> Any:
    """Tiny RFC 6901 lookup; None when absent."""
    if pointer in ("", "/"):
        return doc
    cur = doc
    for raw in pointer.lstrip("/").split("/"):
        part = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(cur, dict) and part in cur:
            cur = cur[part]
        elif isinstance(cur, list) and part.isdigit() and int(part) < len(cur):
            cur = cur[int(part)]
        else:
            return None
    return cur


async def amain(ns: argparse.Namespace) -> int:
    import anyio

    driver = Driver(ns)
    try:
        with anyio.fail_after(ns.overall_timeout_s):
            out, ok = await driver.run()
    except BaseException as e:  # noqa: BLE001 - the contract is one JSON line whatever happens
        if isinstance(e, KeyboardInterrupt):
            raise
        leaf = leaf_exception(e)
        log.error("client failed:\n%s", "".join(traceback.format_exception(leaf)))
        desc = describe_exception(e)
        if isinstance(leaf, TimeoutError) and not desc.get("message"):
            desc["message"] = f"overall timeout of {ns.overall_timeout_s}s exceeded"
        if driver.elicitations:
            desc["elicitations"] = driver.elicitations
        if driver.progress:
            desc["progress"] = driver.progress
        if driver.http_errors:
            desc["http_errors"] = driver.http_errors
        emit(desc)
        return 1
    if driver.http_errors:
        out["http_errors"] = driver.http_errors
    emit(out)
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    ns = parse_args(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.DEBUG if ns.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if not ns.verbose:
        log.setLevel(logging.INFO)
    try:
        import anyio
        import mcp  # noqa: F401
    except ImportError as e:
        emit({"exception": "ImportError", "message": f"{e} (run tests/clients/py/install.sh)"})
        return 1
    return anyio.run(amain, ns)


if __name__ == "__main__":
    sys.exit(main())
