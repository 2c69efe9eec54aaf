#!/usr/bin/env bash
# System packages luminal_lab needs: graphviz's `dot` for stage pictures, and chromium
# (/usr/bin/chromium) for the browser tests (the HTML report, the JupyterLab extension), and
# Node.js with npm to build the extension and run its tests, and binutils' `strip` (scripts/gpu-check shrinks egglog's
# bindings with it for the GPU machine).
# Idempotent: installs only what is missing. Uses sudo when not root.
set -euo pipefail
missing=()
command -v dot >/dev/null 2>&1 || missing+=(graphviz)
[ -x /usr/bin/chromium ] || missing+=(chromium)
command -v npm >/dev/null 2>&1 || missing+=(nodejs npm)
command -v strip >/dev/null 2>&1 || missing+=(binutils)
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  SUDO=sudo
else
  SUDO=
fi
echo "installing system packages: ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
