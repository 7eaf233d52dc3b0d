#!/usr/bin/env python3
"""Drives two MCP stdio servers against the same Android device and prints figures.

Ours (`openphone mcp serve`, the daemon on `--device adb:SERIAL`) and mobile-mcp
(`@mobilenext/mobile-mcp`) each get the same sequence on the same (fake) device, in the same
run: screen reads, taps, typing and screenshots, N times each, timed from the client's
`tools/call` to its answer (wall clock, perf_counter). Then the tokens of one screen read of
the same screen: our compact form, our full form, and mobile-mcp's element list — the text a
model receives (`content[].text` of the tool result), counted with tiktoken.

bench/adb-compare.sh sets everything up and calls this; run that, not this.
"""

import argparse
import gzip
import json
import os
import shlex
import statistics
import subprocess
import sys
import threading
import time


class McpStdio:
    """A minimal MCP client over stdio (newline-delimited JSON-RPC)."""

    def __init__(self, name, argv, env):
        self.name = name
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            text=True,
            bufsize=1,
        )
        self.stderr = []
        threading.Thread(target=self._drain, daemon=True).start()
        self.next_id = 0
        answer = self.request(
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "adb-compare", "version": "1"},
            },
        )
        if "result" not in answer:
            raise RuntimeError(f"{name}: initialize failed: {answer}")
        self.notify("notifications/initialized", {})

    def _drain(self):
        for line in self.proc.stderr:
            self.stderr.append(line.rstrip("\n"))

    def notify(self, method, params):
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", "method": method, "params": params}) + "\n")
        self.proc.stdin.flush()

    def request(self, method, params, timeout=120):
        self.next_id += 1
        rid = self.next_id
        self.proc.stdin.write(
            json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}) + "\n"
        )
        self.proc.stdin.flush()
        while True:
            line = self.proc.stdout.readline()
            if not line:
                tail = "\n".join(self.stderr[-20:])
                raise RuntimeError(f"{self.name} closed its stdout; stderr:\n{tail}")
            try:
                msg = json.loads(line)
            except json.JSONDecodeError:
                continue
            if msg.get("id") == rid:
                return msg

    def call(self, tool, args):
        """(seconds, is_error, text) of one tools/call."""
        start = time.perf_counter()
        answer = self.request("tools/call", {"name": tool, "arguments": args})
        took = time.perf_counter() - start
        if "error" in answer:
            return took, True, json.dumps(answer["error"])
        result = answer.get("result", {})
        texts = [c.get("text", "") for c in result.get("content", []) if c.get("type") == "text"]
        images = [c for c in result.get("content", []) if c.get("type") == "image"]
        text = "\n".join(texts)
        if images and not text:
            text = f"<{len(images)} image(s)>"
        return took, bool(result.get("isError")), text

    def close(self):
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=10)
        except Exception:
            self.proc.kill()
            self.proc.wait()


def encoder(name, venv_site):
    """tiktoken's encoding `name`, its BPE file read from the copy the `bpe-openai` package
    ships (tiktoken itself would download it; this machine reaches no such host). tiktoken
    checks the file's SHA-256 against the one it expects, so the ranks are the genuine ones."""
    import tiktoken
    import tiktoken.load as load

    shipped = os.path.join(venv_site, "bpe_openai", "data", f"{name}.tiktoken.gz")
    original = load.read_file

    def read_file(blobpath):
        if blobpath.endswith(f"/{name}.tiktoken"):
            with gzip.open(shipped, "rb") as f:
                return f.read()
        return original(blobpath)

    load.read_file = read_file
    return tiktoken.get_encoding(name)


def pct(values, p):
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, int(round(p / 100 * len(ordered) + 0.5)) - 1))
    return ordered[k]


def run_ops(client, ops, n):
    """{op: [ms…]} and the first error per op."""
    times, errors = {}, {}
    for op, (tool, args) in ops.items():
        if tool is None:
            continue
        samples = []
        for _ in range(n):
            took, is_error, text = client.call(tool, args)
            if is_error:
                errors.setdefault(op, text[:300])
            samples.append(took * 1000)
        times[op] = samples
    return times, errors


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ours", required=True, help="command line of our MCP stdio server")
    ap.add_argument("--theirs", required=True, help="command line of mobile-mcp")
    ap.add_argument("--serial", required=True)
    ap.add_argument("-n", type=int, default=50)
    ap.add_argument("--tap", default="540,180", help="x,y of a tap that changes nothing")
    ap.add_argument("--encoding", default="o200k_base,cl100k_base", help="comma-separated")
    ap.add_argument("--venv-site", required=True)
    ap.add_argument("--prepare", default="", help="shell command run before the token read")
    ap.add_argument("--focus", default="", help="shell command that focuses a text field")
    ap.add_argument("--json", dest="json_out", default="", help="also write the figures here")
    a = ap.parse_args()
    x, y = (int(v) for v in a.tap.split(","))
    env = dict(os.environ)
    names = [n.strip() for n in a.encoding.split(",") if n.strip()]
    encs = {n: encoder(n, a.venv_site) for n in names}

    ours = McpStdio("ours", shlex.split(a.ours), env)
    theirs = McpStdio("mobile-mcp", shlex.split(a.theirs), env)
    dev = {"device": a.serial}
    ours_ops = {
        "screen read (compact)": ("openphone_screen_get", {"reason": "bench", "format": "compact"}),
        "screen read (full)": ("openphone_screen_get", {"reason": "bench"}),
        "tap": ("openphone_ui_tap", {"x": x, "y": y, "reason": "bench"}),
        "type": ("openphone_ui_type_text", {"text": "hi", "reason": "bench"}),
        "screenshot": (
            "openphone_screen_get",
            {"reason": "bench", "include_screenshot": True, "include_ui_tree": False,
             "format": "compact"},
        ),
    }
    theirs_ops = {
        "screen read (compact)": ("mobile_list_elements_on_screen", dev),
        "screen read (full)": (None, None),
        "tap": ("mobile_click_on_screen_at_coordinates", {**dev, "x": x, "y": y}),
        "type": ("mobile_type_keys", {**dev, "text": "hi", "submit": False}),
        "screenshot": ("mobile_take_screenshot", dev),
    }

    # Tokens of the same screen, read by both, before anything changes it.
    if a.prepare:
        subprocess.run(a.prepare, shell=True, check=True, env=env)
    tokens = {}
    for label, client, tool, args in [
        ("ours, compact", ours, "openphone_screen_get", {"reason": "bench", "format": "compact"}),
        ("ours, full", ours, "openphone_screen_get", {"reason": "bench"}),
        ("mobile-mcp, mobile_list_elements_on_screen", theirs, "mobile_list_elements_on_screen", dev),
    ]:
        _, is_error, text = client.call(tool, args)
        tokens[label] = {
            "tokens": {n: len(e.encode(text)) for n, e in encs.items()},
            "chars": len(text),
            "error": text[:300] if is_error else None,
        }
    if a.focus:
        subprocess.run(a.focus, shell=True, check=True, env=env)

    # Latency: the same ops in the same run, alternating sides op by op.
    figures = {}
    errors = {}
    for op in ours_ops:
        for side, client, ops in [("ours", ours, ours_ops), ("mobile-mcp", theirs, theirs_ops)]:
            t, e = run_ops(client, {op: ops[op]}, a.n)
            for k, v in t.items():
                figures[(side, k)] = v
            for k, v in e.items():
                errors[(side, k)] = v
    ours.close()
    theirs.close()

    print(f"\nLatency over the real adb to the fake device, n={a.n} per command (ms)\n")
    print(f"| command | ours p50 | ours p99 | mobile-mcp p50 | mobile-mcp p99 |")
    print(f"|---|---:|---:|---:|---:|")
    for op in ours_ops:
        row = [op]
        for side in ("ours", "mobile-mcp"):
            v = figures.get((side, op))
            row += ["—", "—"] if not v else [f"{pct(v, 50):.1f}", f"{pct(v, 99):.1f}"]
        print("| " + " | ".join(row) + " |")
    print("\nTokens per screen read of the same screen (tiktoken)\n")
    print("| form | " + " | ".join(f"tokens ({n})" for n in names) + " | characters |")
    print("|---|" + "---:|" * (len(names) + 1))
    for label, t in tokens.items():
        note = f" (error: {t['error']})" if t["error"] else ""
        counts = " | ".join(str(t["tokens"][n]) for n in names)
        print(f"| {label}{note} | {counts} | {t['chars']} |")
    if errors:
        print("\nCalls that answered an error (first message per command):")
        for (side, op), msg in errors.items():
            print(f"- {side} {op}: {msg}")
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump(
                {
                    "n": a.n,
                    "encodings": names,
                    "latency_ms": {
                        f"{side}/{op}": {"p50": pct(v, 50), "p99": pct(v, 99)}
                        for (side, op), v in figures.items()
                    },
                    "tokens": tokens,
                    "errors": {f"{s}/{o}": m for (s, o), m in errors.items()},
                },
                f,
                indent=2,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
