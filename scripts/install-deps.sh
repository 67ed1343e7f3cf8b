#!/usr/bin/env bash
# Installs what building, running and testing permitd needs on Debian 12,
# and nothing that is already there.
#
#   scripts/install-deps.sh run    build + run (compiler, libraries, redis)
#   scripts/install-deps.sh test   also what the tests need (python3, node, chromium)
#   scripts/install-deps.sh bench  run + what tests/bench needs (wrk, valgrind, node)
#
# Runs apt-get only when a package is missing, as root or through sudo.
set -euo pipefail

what=${1:-test}

pkgs=(build-essential cmake pkg-config protobuf-c-compiler libprotobuf-c-dev
      libmicrohttpd-dev libgnutls28-dev libnghttp2-dev nettle-dev libhiredis-dev libjansson-dev zlib1g-dev libargon2-dev
      redis-server redis-tools mariadb-server mariadb-client libmariadb-dev
      curl ca-certificates)
if [ "$what" = test ]; then
    # clang + its runtime libraries: the libFuzzer build (tests/fuzz)
    pkgs+=(python3 docker-compose chromium clang libclang-rt-14-dev)
    # openssl: test_tls.py makes its certificate and offers old TLS with s_client
    pkgs+=(openssl)
    # wrk: the load of the chaos test (tests/chaos)
    pkgs+=(wrk)
    # nginx: the forward-auth tests put a real nginx (auth_request) in front
    # of permitd (tests/integration/test_gateway.py)
    pkgs+=(nginx)
    # caddy: and a real Caddy (forward_auth) running docs/gateways.md's block
    # (tests/integration/test_gateway_spoof.py)
    pkgs+=(caddy)
    # prometheus: its promtool checks /metrics (tests/integration/test_metrics.py)
    # and the alert rules (tests/unit/test_alert_files.py); its server scrapes
    # two permitd instances in tests/integration/test_alerts.py
    pkgs+=(prometheus)
    # the bench scripts' smoke runs (ctest -L bench): valgrind for
    # redis-cost.sh; stress-ng keeps a core busy for PERMITD_TEST_BUSY
    pkgs+=(valgrind stress-ng)
fi
if [ "$what" = bench ]; then
    # nginx: tests/bench/gateway.sh measures forward-auth through it
    pkgs+=(nginx)
    # valgrind: Redis's instructions per decision (tests/bench/redis-cost.sh)
    pkgs+=(wrk valgrind)
fi

missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Node.js: the e2e tests' code generator (protoc-gen-es 2.x) wants Node 20.
# Debian 12 ships 18, so a Node already on the machine is kept, and Debian's
# is installed only when there is none (with a warning below).
if [ "$what" != run ] && ! command -v node >/dev/null 2>&1; then
    missing+=(nodejs npm)
fi

if [ ${#missing[@]} -eq 0 ]; then
    exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || {
        echo "install-deps: need root (or sudo) to install: ${missing[*]}" >&2
        exit 1
    }
    sudo=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
# Debian starts services on install; permitd runs its own servers, so keep
# the packaged ones from starting (and from holding their default ports).
policy=/usr/sbin/policy-rc.d
if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' | $sudo tee "$policy" >/dev/null
    $sudo chmod +x "$policy"
    trap '$sudo rm -f "$policy"' EXIT
fi
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"

if [ "$what" = test ] && command -v node >/dev/null 2>&1; then
    major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
    if [ "$major" -lt 20 ]; then
        echo "install-deps: warning: node $(node --version) is older than 20, which the e2e" \
             "tests' code generator (protoc-gen-es) asks for" >&2
    fi
fi
