#!/usr/bin/env bash
# Installs what the dashboard's browser suite needs: Debian's chromium (apt-get, when missing)
# and playwright-core from tests/dashboard/package-lock.json (npm ci, into the git-ignored
# tests/dashboard/node_modules). Idempotent.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if ! command -v chromium >/dev/null 2>&1; then
  echo "[dashboard/install] installing chromium"
  if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
fi
chromium --version 2>/dev/null || true
cd "$HERE"
want="$(node -p 'require("./package.json").dependencies["playwright-core"]')"
have="$(node -p 'try { require("./node_modules/playwright-core/package.json").version } catch { "" }')"
if [ "$want" != "$have" ]; then
  echo "[dashboard/install] npm ci (playwright-core $want)"
  npm ci --no-audit --no-fund --loglevel=error
fi
