"""Run by mcp_suite.py with the Hermes venv's Python (its MCP SDK, the one Hermes uses):
a tap answered pending, openphone_confirmation_status pending, approved, then approved with
the tap's result; an unknown id is an error. Prints one JSON line of what it saw.
Usage: python status_check.py MCP_URL TOKEN OPENPHONE_BIN DATA_DIR"""
import asyncio
import json
import subprocess
import sys

from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client

URL, TOKEN, OPENPHONE, DATA = sys.argv[1:5]


async def main():
    seen = {}
    async with streamablehttp_client(URL, headers={"Authorization": f"Bearer {TOKEN}"}) as (r, w, _):
        async with ClientSession(r, w) as s:
            await s.initialize()
            tap = await s.call_tool("openphone_ui_tap", {"x": 7, "y": 9, "reason": "status check"})
            seen["tap"] = [tap.isError, tap.structuredContent.get("outcome")]
            cid = tap.structuredContent["confirmation_id"]
            before = await s.call_tool("openphone_confirmation_status", {"confirmation_id": cid})
            seen["before"] = [before.isError, before.structuredContent.get("status")]
            subprocess.run([OPENPHONE, "confirmations", "approve", cid, "--data-dir", DATA],
                           check=True, capture_output=True)
            after = await s.call_tool("openphone_confirmation_status", {"confirmation_id": cid})
            seen["after"] = [after.isError, after.structuredContent.get("status"),
                             after.structuredContent.get("result", {}).get("action")]
            unknown = await s.call_tool("openphone_confirmation_status", {"confirmation_id": "nope"})
            seen["unknown"] = unknown.isError
    print(json.dumps(seen))


asyncio.run(main())
