#!/usr/bin/env bash
# Installs what the ADB backend's tests need: Debian's `adb` client (apt-get, when missing).
# The tests drive the real client against `openphone-fake-adbd`, each on its own adb server
# port, so nothing here touches a phone or the default server on 5037.
set -euo pipefail
if ! command -v adb >/dev/null 2>&1; then
  SUDO=""
  if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq adb >/dev/null
fi
adb version | head -2
