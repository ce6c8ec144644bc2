#!/usr/bin/env bash
# The console's browser tests drive Debian's Chromium (headless) with Playwright; Playwright's
# own browser download cannot work on these machines. Install the Debian package when missing.
set -euo pipefail
if [ -x /usr/bin/chromium ]; then
  exit 0
fi
echo "ensure-chromium: installing chromium from Debian" >&2
if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium
test -x /usr/bin/chromium
