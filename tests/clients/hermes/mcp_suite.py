#!/usr/bin/env python3
"""Real Hermes Agent against the daemon over MCP (issue 33): stdio and Streamable HTTP.

Runs `hermes chat -q` (the pinned hermes-agent in .cache/hermes-venv, tests/clients/hermes/
install.sh) with `openphone-fake-model` as its model and the entry `openphone mcp config
hermes|hermes-http` prints as its MCP server, against a fresh `openphone serve` (simulated
phone, loopback, a `hermes` runtime with its own token, a 2 s inline wait). Checks:

  read        stdio and HTTP: the screen read reaches Hermes; the audit names client:hermes
              (Hermes sends the SDK's generic client name "mcp"); characters per read printed
  denied      three taps the user denies, then a read: the read still reaches the daemon
              (policy outcomes do not open Hermes' circuit breaker)
  late        a tap approved after the inline wait, then Hermes' identical retry: exactly one
              tap ran, one confirmation, and the retry's tool message holds the tap's result
  status      openphone_confirmation_status through Hermes' MCP SDK: pending, then approved
              with the tap's result; an unknown id is an error
  cron        a Hermes cron job (`hermes cron create` one-shot a few seconds ahead, run by
              `hermes cron tick`, Hermes' scheduler) whose tap parks and is approved after
              the inline wait; the job's retry gets the tap's result; exactly one tap ran, and
              it ran before the job's execution was recorded "completed" (never while the tap
              is still pending)

Exit 0 when every check passed (or when Hermes is not installed: SKIP), 1 otherwise.
Usage: python3 tests/clients/hermes/mcp_suite.py   (after `cargo build -p openphone-cli
-p openphone-fake-model`; OPENPHONE_BIN and FAKE_MODEL_BIN override the binaries)
"""
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
HERMES = os.path.join(ROOT, ".cache", "hermes-venv", "bin", "hermes")
OPENPHONE = os.environ.get("OPENPHONE_BIN", os.path.join(ROOT, "target", "debug", "openphone"))
FAKE = os.environ.get("FAKE_MODEL_BIN", os.path.join(ROOT, "target", "debug", "openphone-fake-model"))
TOKEN = "hermes-suite-token-0123456789abcdef"
PREFIX = "mcp__openphone__"
FAILED = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        FAILED.append(what)


def op(data, *args, env=None):
    out = subprocess.run([OPENPHONE, *args, "--data-dir", data], capture_output=True, text=True,
                         env=env, timeout=60)
    if out.returncode != 0:
        raise RuntimeError(f"openphone {' '.join(args)}: {out.stderr}")
    return out.stdout


def audit(data):
    lines = op(data, "audit", "export", "--format", "jsonl").splitlines()
    return [json.loads(l) for l in lines if l.strip()]


def pending(data):
    return json.loads(op(data, "confirmations", "list", "--json"))["confirmations"]


class Daemon:
    def __init__(self, tmp):
        self.data = os.path.join(tmp, "d")
        config = os.path.join(tmp, "openphone.toml")
        with open(config, "w") as f:
            f.write(
                "[mcp]\nlocal_confirmation_wait_ms = 2000\n\n"
                f"[[runtimes]]\nid = \"hermes\"\ntoken = \"{TOKEN}\"\n"
                "grants = [\"safe_read\", \"private_read\", \"dangerous\"]\n"
                "max_autonomy = \"ask_before_action\"\n")
        self.log = open(os.path.join(tmp, "serve.log"), "w")
        self.proc = subprocess.Popen([OPENPHONE, "serve", "--data-dir", self.data, "--config", config,
                                      "--listen", "127.0.0.1:0"], stdout=self.log, stderr=self.log)
        for _ in range(200):
            if os.path.exists(os.path.join(self.data, "endpoint.json")):
                break
            time.sleep(0.05)
        else:
            raise RuntimeError("the daemon did not start")

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=30)


def hermes_home(tmp, daemon, transport, script):
    """A fresh HERMES_HOME whose config.yaml has the daemon's MCP entry and the scripted model
    (started here: the caller terminates the returned process)."""
    home = tempfile.mkdtemp(dir=tmp, prefix="hermes-home-")
    with open(os.path.join(home, "script.json"), "w") as f:
        json.dump(script, f)
    model = subprocess.Popen([FAKE, "--script", os.path.join(home, "script.json")],
                             stdout=subprocess.PIPE, text=True)
    url = model.stdout.readline().strip()
    env = dict(os.environ, OPENPHONE_MCP_TOKEN=TOKEN)
    entry = op(daemon.data, "mcp", "config", "hermes" if transport == "stdio" else "hermes-http",
               env=env)
    with open(os.path.join(home, "config.yaml"), "w") as f:
        f.write(entry)
        f.write(f"model:\n  default: fake-model\n  provider: custom\n  base_url: \"{url}\"\n"
                "  api_key: fake-key\n")
    return home, model


def tool_messages(home):
    db = sqlite3.connect(os.path.join(home, "state.db"))
    return [r[0] for r in db.execute("select content from messages where role='tool' order by id")]


def hermes_turn(tmp, daemon, transport, script, query="use the phone"):
    """One `hermes chat -q` turn; returns the tool messages Hermes recorded."""
    home, model = hermes_home(tmp, daemon, transport, script)
    try:
        run = subprocess.run([HERMES, "chat", "-q", query, "-Q", "--max-turns", "12"],
                             env=dict(os.environ, HERMES_HOME=home), capture_output=True, text=True,
                             timeout=300)
        if run.returncode != 0:
            print(run.stdout[-2000:], run.stderr[-2000:])
        return tool_messages(home)
    finally:
        model.terminate()
        model.wait(timeout=10)


def hermes_cron(tmp, daemon, script):
    """A Hermes cron job that uses the phone: `hermes cron create` with a one-shot schedule
    (an ISO time 4 s ahead), then, once it is due, `hermes cron tick` (Hermes' scheduler run
    once: it claims the due job, runs its agent, saves the output and records the
    execution). Returns the job's execution record (`hermes cron runs`: id, status, ...), the
    cron session's tool messages, and the audit as it was when the tick returned."""
    home, model = hermes_home(tmp, daemon, "stdio", script)
    env = dict(os.environ, HERMES_HOME=home)
    try:
        due = time.time() + 4
        at = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(due))
        made = subprocess.run([HERMES, "cron", "create", at, "Tap the phone's Open button.",
                               "--name", "phone-tap"], env=env, capture_output=True, text=True,
                              timeout=120)
        if made.returncode != 0 or "Created job:" not in made.stdout:
            raise RuntimeError(f"hermes cron create: {made.stdout}{made.stderr[-1000:]}")
        job_id = made.stdout.split("Created job:")[1].split()[0]
        time.sleep(max(0.0, due - time.time()) + 1.5)
        ticked = subprocess.run([HERMES, "cron", "tick"], env=env, capture_output=True,
                                text=True, timeout=300)
        audit_when_done = audit(daemon.data)
        if ticked.returncode != 0:
            print(ticked.stdout[-1000:], ticked.stderr[-1000:])
        runs = subprocess.run([HERMES, "cron", "runs"], env=env, capture_output=True, text=True,
                              timeout=60).stdout
        execution = next((l.split() for l in runs.splitlines() if f"job={job_id}" in l), [])
        print(f"     hermes cron runs: {' '.join(execution)}")
        return execution, tool_messages(home), audit_when_done
    finally:
        model.terminate()
        model.wait(timeout=10)


def call(tool, **args):
    return {"tool_call": {"name": PREFIX + tool, "arguments": args}}


def decide_each(daemon, verb, delay, count, stop):
    """Decides each confirmation that appears, `delay` seconds after it appears."""
    seen = set()
    while not stop.is_set() and len(seen) < count:
        for c in pending(daemon.data):
            cid = c["confirmation_id"]
            if cid not in seen:
                seen.add(cid)
                time.sleep(delay)
                op(daemon.data, "confirmations", verb, cid)
        time.sleep(0.2)


def main():
    if not os.path.exists(HERMES):
        print("SKIP: Hermes Agent is not installed (bash tests/clients/hermes/install.sh)")
        return 0
    for binary in (OPENPHONE, FAKE):
        if not os.path.exists(binary):
            print(f"missing {binary}: cargo build -p openphone-cli -p openphone-fake-model")
            return 1
    tmp = tempfile.mkdtemp(prefix="hermes-mcp-")
    daemon = Daemon(tmp)
    try:
        read = call("openphone_screen_get", reason="look at the screen")
        for transport in ("stdio", "http"):
            tools = hermes_turn(tmp, daemon, transport, [read, {"text": "read"}])
            ok = len(tools) == 1 and "com.android.launcher" in tools[0]
            check(ok, f"{transport}: Hermes gets the screen read")
            if tools:
                print(f"     characters per screen read (Hermes' tool message): {len(tools[0])}")
        principals = {r["caller"]["principal"] for r in audit(daemon.data)
                      if r.get("tool") == "openphone.screen.get"}
        check(principals == {f"token:hermes client:hermes"},
              f"the audit names the runtime for the generic client name: {principals}")

        # Three denials, then a read that must reach the daemon.
        stop = threading.Event()
        denier = threading.Thread(target=decide_each, args=(daemon, "deny", 0.0, 3, stop))
        denier.start()
        taps = [call("openphone_ui_tap", x=10 + i, y=20, reason=f"tap {i}") for i in range(3)]
        before = len(audit(daemon.data))
        tools = hermes_turn(tmp, daemon, "stdio", taps + [read, {"text": "done"}])
        stop.set()
        denier.join()
        after = [r for r in audit(daemon.data)[before:] if r.get("tool") == "openphone.screen.get"]
        check(len(tools) == 4 and "unreachable" not in tools[3] and "com.android.launcher" in tools[3],
              "after three denials the read still reaches the daemon and Hermes")
        check(len(after) >= 1, "the read after three denials is in the audit")

        # A tap approved after the 2 s inline wait, then Hermes' identical retry.
        before = len(audit(daemon.data))
        stop = threading.Event()
        approver = threading.Thread(target=decide_each, args=(daemon, "approve", 3.0, 1, stop))
        approver.start()
        tap = call("openphone_ui_tap", x=540, y=1200, reason="open the app")
        retry = call("openphone_ui_tap", x=540, y=1200, reason="open the app, again")
        # The model asks again once the user has approved (5 s: after the 3 s approval).
        later = {"delay": {"ms": 5000, "then": retry}}
        tools = hermes_turn(tmp, daemon, "stdio", [tap, later, {"text": "done"}])
        stop.set()
        approver.join()
        records = [r for r in audit(daemon.data)[before:] if r.get("tool") == "openphone.ui.tap"]
        # The approved tap runs under its confirmation's transition; the retry's own record is
        # answered from it (a replay), never a second run.
        executed = [r for r in records if r.get("status") == "ok"
                    and (r.get("kind") == "confirmation_transition" or r.get("confirmation") != "replayed")]
        print("     retry record: " + json.dumps({k: records[-1].get(k) for k in ("kind", "status", "confirmation", "decision")}))
        confirmations = {r.get("confirmation_id") for r in records if r.get("confirmation_id")}
        check(len(tools) == 2 and '"outcome": "pending"' in tools[0], "the first call answers pending")
        check(len(tools) == 2 and '"outcome"' not in tools[1] and "Done" in tools[1],
              "the retry after the approval gets the tap's result")
        if len(tools) == 2:
            print("     retry's tool message: " + tools[1][-400:].replace("\n", " "))
        check(len(confirmations) == 1, f"one confirmation: {confirmations}")
        print(f"     tap audit records: {[(r.get('kind'), r.get('status')) for r in records]}")
        check(len(executed) == 1, f"the tap ran once: {len(executed)}")

        # A Hermes cron job whose tap parks and is approved after the 2 s inline wait: the job's
        # model asks again (5 s) and gets the tap's result; the job records "ok" only after the
        # tap ran, and the tap ran once (issue 33, bug 1: the job said "succeeded" while its tap
        # ran 5 s later).
        before = len(audit(daemon.data))
        stop = threading.Event()
        approver = threading.Thread(target=decide_each, args=(daemon, "approve", 3.0, 1, stop))
        approver.start()
        tap = call("openphone_ui_tap", x=300, y=900, reason="cron: press Open")
        retry = call("openphone_ui_tap", x=300, y=900, reason="cron: press Open, again")
        execution, tools, audit_when_done = hermes_cron(
            tmp, daemon, [tap, {"delay": {"ms": 5000, "then": retry}}, {"text": "Pressed Open."}])
        stop.set()
        approver.join()
        taps_when_done = [r for r in audit_when_done[before:] if r.get("tool") == "openphone.ui.tap"]
        records = [r for r in audit(daemon.data)[before:] if r.get("tool") == "openphone.ui.tap"]
        def ran(rs):
            return [r for r in rs if r.get("status") == "ok"
                    and (r.get("kind") == "confirmation_transition" or r.get("confirmation") != "replayed")]
        executed = ran(records)
        ran_before_done = ran(taps_when_done)
        print(f"     cron tap audit records: {[(r.get('kind'), r.get('status')) for r in records]}")
        check(len(tools) == 2 and '"outcome": "pending"' in tools[0],
              "cron: the tap parks and the job's first call answers pending")
        check(len(tools) == 2 and '"outcome"' not in tools[1] and "Done" in tools[1],
              "cron: the job's retry after the late approval gets the tap's result")
        check(len(executed) == 1, f"cron: the tap ran once: {len(executed)}")
        check(len(ran_before_done) == 1 and execution[1:2] == ["completed"],
              "cron: the job's execution completed only after its tap ran "
              f"(taps done when the job finished: {len(ran_before_done)})")

        # openphone_confirmation_status through the MCP SDK Hermes uses (its venv's Python).
        with open(os.path.join(daemon.data, "endpoint.json")) as f:
            mcp_url = json.load(f)["mcp_url"]
        out = subprocess.run([os.path.join(os.path.dirname(HERMES), "python"),
                              os.path.join(os.path.dirname(__file__), "status_check.py"),
                              mcp_url, TOKEN, OPENPHONE, daemon.data],
                             capture_output=True, text=True, timeout=120)
        seen = json.loads(out.stdout.strip().splitlines()[-1]) if out.returncode == 0 else {}
        check(seen == {"tap": [False, "pending"], "before": [False, "pending"],
                       "after": [False, "approved", "tap"], "unknown": True},
              f"the status tool collects a late approval: {seen or out.stderr[-500:]}")
    finally:
        daemon.stop()
    print("FAILED: " + "; ".join(FAILED) if FAILED else "all Hermes MCP checks passed")
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
