#!/usr/bin/env bash
# The gRPC listener (issue 25) against the Connect path, in one run:
# tests/bench/gateway.sh with its Connect and gRPC paths only (Acquire over
# Connect with wrk, Acquire over gRPC and Envoy's ShouldRateLimit with
# grpc_load.c, in alternating rounds), written to tests/bench/RESULTS-grpc.md.
# gateway.sh holds the one copy of the set-up, the loads and the table;
# run it alone to measure forward-auth (straight and through nginx) beside
# these in the same run.
#
#   tests/bench/grpc.sh          BENCH_ROUNDS (3), BENCH_DURATION (5 s)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
export BENCH_PATHS=${BENCH_PATHS:-connect grpc-acquire grpc-rls}
export BENCH_RESULTS=${BENCH_RESULTS:-$root/tests/bench/RESULTS-grpc.md}
exec "$root/tests/bench/gateway.sh" "$@"
