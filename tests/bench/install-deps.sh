#!/usr/bin/env bash
# What tests/bench/run.sh needs on Debian 12, on top of what building and
# running permitd needs: wrk, redis-tools (redis-benchmark, redis-cli) and
# Node.js with npm (the peer). Installs only what is missing.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
"$root/scripts/install-deps.sh" run

missing=()
for p in wrk redis-tools; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
[ ${#missing[@]} -eq 0 ] && exit 0

echo "bench install-deps: installing ${missing[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || {
        echo "bench install-deps: need root (or sudo) to install: ${missing[*]}" >&2
        exit 1
    }
    sudo=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
