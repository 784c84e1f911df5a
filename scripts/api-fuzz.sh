#!/usr/bin/env bash
# API fuzzing with Schemathesis: starts `kplane up` (debug build) with a viewer, an operator and
# an admin token, then generates requests from its OpenAPI document against every route, once
# per caller (no token, viewer, operator, admin). Fails on any 5xx, on fewer than
# KPLANE_FUZZ_MIN_REQUESTS requests in all (default 2000), or if kplane dies or does not stop
# cleanly on SIGINT. Skips (exit 0) without schemathesis unless KPLANE_REQUIRE_FUZZ=1 (CI).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v schemathesis >/dev/null; then
    if [[ ${KPLANE_REQUIRE_FUZZ:-} == 1 ]]; then
        echo "api fuzz: schemathesis missing (pip install schemathesis)" >&2
        exit 1
    fi
    echo "api fuzz: skipped (schemathesis missing; CI installs it)"
    exit 0
fi
min_requests=${KPLANE_FUZZ_MIN_REQUESTS:-2000}
per_role=${KPLANE_FUZZ_EXAMPLES:-30}
source scripts/lib.sh
bin=$(test_binary)
port=$(free_port)
work=$(mktemp -d)
declare -A token
for role in viewer operator admin; do
    token[$role]=$(python3 -c 'import secrets; print("fuzz_" + secrets.token_hex(16))')
done
{
    for role in viewer operator admin; do
        sha=$(printf %s "${token[$role]}" | sha256sum | cut -d' ' -f1)
        printf '[[http.tokens]]\nname = "fuzz-%s"\nrole = "%s"\nsha256 = "%s"\n\n' "$role" "$role" "$sha"
    done
    # The fuzzer explores; the per-token limits would answer most of it 429, and a debug
    # build's queries beside the running pipeline can take seconds (504 is a 5xx).
    printf '[intent-api]\nquery-rate = 1000000\nintent-rate = 1000000\nquery-timeout = "60s"\n'
} >"$work/kplane.toml"
"$bin" --config "$work/kplane.toml" up --api "127.0.0.1:$port" --data-dir "$work/data" \
    --duration 1800s --flows 50 >"$work/up.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; rm -rf "$work"' EXIT
console_url "$work/up.log" >/dev/null
base="http://127.0.0.1:$port"
total=0
for role in none viewer operator admin; do
    auth=()
    [[ $role != none ]] && auth=(-H "Authorization: Bearer ${token[$role]}")
    echo "== api fuzz as $role"
    report="$work/report-$role"
    # Only "no 5xx" is checked: the document names statuses, it does not promise every body.
    # The event streams never end by design: they are checked below, not fuzzed. (The
    # coverage phase is left out: Schemathesis 4.32 fails inside its own generator on the
    # intent schema.)
    schemathesis run "$base/openapi.json" --url "$base" "${auth[@]}" \
        --checks not_a_server_error --max-examples "$per_role" --workers 1 \
        --phases examples,fuzzing --request-timeout 90 \
        --exclude-path /v1/events/stream --exclude-path /v1/anomalies/stream \
        --suppress-health-check all --warnings off \
        --report har --report-dir "$report" --no-color | sed -n '/FAILURES\|ERRORS/,$p;/Test cases:/,+1p' 
    n=$(python3 -c 'import json, glob, sys; print(sum(len(json.load(open(f))["log"]["entries"]) for f in glob.glob(sys.argv[1] + "/*")))' "$report")
    for stream in /v1/events/stream /v1/anomalies/stream; do
        # curl ends an open stream at --max-time (exit 28); the status is what counts.
        want=200 wait=5
        [[ $role == none ]] && want=401 wait=30
        code=$(curl -s -o /dev/null -w '%{http_code}' --max-time $wait "${auth[@]}" "$base$stream" || true)
        [[ $code == "$want" ]] || { echo "api fuzz: $stream as $role answered $code, not $want" >&2; exit 1; }
        n=$((n + 1))
    done
    echo "api fuzz as $role: $n requests"
    total=$((total + n))
    kill -0 $pid 2>/dev/null || { tail -n 50 "$work/up.log"; echo "api fuzz: kplane up died" >&2; exit 1; }
done
echo "api fuzz: $total requests in all, no 5xx"
if ((total < min_requests)); then
    echo "api fuzz: only $total requests (want $min_requests): raise KPLANE_FUZZ_EXAMPLES" >&2
    exit 1
fi
kill -INT $pid
wait $pid
trap 'rm -rf "$work"' EXIT
echo "api fuzz: kplane up stopped cleanly"
