#!/usr/bin/env bash
# What tests/bench/run.sh needs on Debian 12: what running permitd needs, plus
# wrk, redis-tools (redis-benchmark, redis-cli) and Node.js (the peer).
# scripts/install-deps.sh knows the list and installs only what is missing.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
exec "$root/scripts/install-deps.sh" bench
