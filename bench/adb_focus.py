#!/usr/bin/env python3
"""Taps, in order, the first element whose resource-id tail starts with each given prefix
(re-reading the screen with `uiautomator dump` before each tap): `adb_focus.py ADB SERIAL
thread_ message_input` opens the first conversation and focuses its text field."""

import re
import subprocess
import sys
import xml.etree.ElementTree as ET


def dump(adb, serial):
    out = subprocess.run(
        [adb, "-s", serial, "exec-out", "uiautomator", "dump", "/dev/tty"],
        check=True, capture_output=True,
    ).stdout.decode()
    start, end = out.find("<?xml"), out.rfind(">")
    return ET.fromstring(out[start : end + 1].split("?>", 1)[1])


def main():
    adb, serial, *prefixes = sys.argv[1:]
    for prefix in prefixes:
        root = dump(adb, serial)
        for node in root.iter("node"):
            tail = node.get("resource-id", "").rsplit("/", 1)[-1]
            if tail.startswith(prefix) and node.get("clickable") == "true":
                l, t, r, b = map(int, re.findall(r"\d+", node.get("bounds")))
                subprocess.run(
                    [adb, "-s", serial, "shell", "input", "tap", str((l + r) // 2), str((t + b) // 2)],
                    check=True,
                )
                break
        else:
            sys.exit(f"no clickable element with an id starting {prefix!r} on the screen")


if __name__ == "__main__":
    main()
