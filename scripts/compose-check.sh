#!/usr/bin/env bash
# docker-compose.yml run for real, then torn down: the kplane image built from the Dockerfile,
# the stack started with the demo emulator, and checked —
#   * every container with a healthcheck healthy, the topic init step exited 0, the rest running;
#   * the API answering flows from the demo emulator (with a token, as a user calls it);
#   * every Prometheus target up;
#   * every query of every Grafana panel (deploy/compose/grafana/dashboards/) returning series,
#     through Prometheus' API.
#
#   scripts/compose-check.sh                 # public images pulled from their registries
#   scripts/compose-check.sh --local-images  # no registry reachable: local bases
#                                            # (image-check.sh --local-bases) and
#                                            # docker-compose.local.yml (tansu, Debian's
#                                            # Prometheus, no Grafana)
#   … --reuse-images                         # keep the images an earlier run built
#
# Needs root, podman, runc and podman-compose (PyPI), and debootstrap for --local-images:
#   apt-get install podman runc debootstrap && pip install podman-compose
# Podman older than 4.6 neither runs healthchecks on its own without systemd nor lets
# podman-compose wait on them: this script runs each container's healthcheck itself, and
# starts the services without podman's dependency links (see `up` below).
set -euo pipefail
cd "$(dirname "$0")/.."
started=$(date +%s)
say() { printf '== %s (%ss)\n' "$*" "$(( $(date +%s) - started ))"; }

local_images=0 reuse=0
for arg in "$@"; do
  case "$arg" in
    --local-images) local_images=1 ;;
    --reuse-images) reuse=1 ;;  # keep images an earlier run built (the stack is still fresh)
    *) echo "usage: $0 [--local-images] [--reuse-images]" >&2; exit 2 ;;
  esac
done
podman=(podman --runtime runc)
project=kplane-check
files=(-f docker-compose.yml)
((local_images)) && files+=(-f docker-compose.local.yml)
# runc copes with hybrid cgroup hierarchies; a container's file and process limits are set
# to what this process has, which a runtime without CAP_SYS_RESOURCE cannot raise (as in
# image-check.sh).
compose=(podman-compose --podman-args=--runtime=runc
  "--podman-run-args=--ulimit nofile=$(ulimit -Hn):$(ulimit -Hn) --ulimit nproc=4096:4096"
  -p "$project" "${files[@]}")

built() { ((reuse)) && podman image exists "$1"; }
say "the kplane image"
if built localhost/kplane:latest; then
  echo "reusing localhost/kplane:latest"
elif ((local_images)); then
  KPLANE_IMAGE=localhost/kplane:latest scripts/image-check.sh --local-bases
else
  KPLANE_IMAGE=localhost/kplane:latest scripts/image-check.sh
fi
if ((local_images)) && ! { built localhost/kplane-kafka:local && built localhost/kplane-prometheus:local; }; then
  say "local equivalents of the public images"
  ctx=$(mktemp -d /tmp/kplane-compose.XXXXXX)
  cp deploy/compose/local/kafka.Containerfile "$ctx/"
  cp "$(scripts/kafka-broker.sh path)" "$ctx/tansu"
  "${podman[@]}" build --network host -f "$ctx/kafka.Containerfile" -t localhost/kplane-kafka:local "$ctx"
  "${podman[@]}" build --network host -f deploy/compose/local/prometheus.Containerfile \
    -t localhost/kplane-prometheus:local "$ctx"
  rm -rf "$ctx"
fi

token=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
export KPLANE_API_TOKEN_SHA256
KPLANE_API_TOKEN_SHA256=$(printf %s "$token" | sha256sum | cut -d' ' -f1)
down() { "${compose[@]}" --profile demo down -v >/dev/null 2>&1 || true; }
down
trap down EXIT
say "podman-compose up (profile demo)"
# --no-deps: podman before 4.6 refuses to start a container linked (--requires) to one that
# has exited — the collector to kafka-init — and cannot wait on health; the services start in
# dependency order, restart until their broker and topics answer, and the wait below is on
# every healthcheck.
"${compose[@]}" --profile demo up -d --no-deps

containers() { "${podman[@]}" ps -a --filter "label=io.podman.compose.project=$project" --format '{{.Names}}'; }
# A healthcheck that is set and not disabled (`disable: true` is the test [NONE]).
has_healthcheck() {
  local test
  test=$("${podman[@]}" inspect --format '{{if .Config.Healthcheck}}{{.Config.Healthcheck.Test}}{{end}}' "$1")
  [ -n "$test" ] && [ "$test" != "[NONE]" ]
}

say "every service healthy"
deadline=$(( $(date +%s) + 300 ))
while :; do
  pending=()
  for c in $(containers); do
    state=$("${podman[@]}" inspect --format '{{.State.Status}} {{.State.ExitCode}}' "$c")
    case "$c" in
      *kafka-init*) [ "$state" = "exited 0" ] || pending+=("$c: $state") ;;
      *)
        if [ "${state%% *}" != running ]; then
          pending+=("$c: $state")
        elif has_healthcheck "$c" && ! "${podman[@]}" healthcheck run "$c" >/dev/null 2>&1; then
          pending+=("$c: not healthy yet")
        fi ;;
    esac
  done
  ((${#pending[@]} == 0)) && break
  if (( $(date +%s) > deadline )); then
    printf '  %s\n' "${pending[@]}" >&2
    for c in $(containers); do echo "--- $c" >&2; "${podman[@]}" logs --tail 20 "$c" >&2 || true; done
    exit 1
  fi
  sleep 3
done
containers | sed 's/^/  ok: /'

say "the API answers flows, Prometheus' targets are up, every panel's query has series"
KPLANE_TOKEN=$token python3 - deploy/compose/grafana/dashboards/*.json <<'PY'
import json, os, sys, time, urllib.parse, urllib.request

def get(url, token=None):
    req = urllib.request.Request(url)
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.load(r)

queries = []
for path in sys.argv[1:]:
    for panel in json.load(open(path))["panels"]:
        for t in panel.get("targets", []):
            if "expr" in t:
                queries.append((panel["title"], t["expr"].replace("$__rate_interval", "1m")))

deadline = time.time() + 300
while True:
    problems = []
    try:
        flows = get("http://127.0.0.1:8080/v1/flows?since=10m", os.environ["KPLANE_TOKEN"])["flows"]
        if not flows:
            problems.append("API: no flows yet")
        targets = get("http://127.0.0.1:9090/api/v1/targets?state=active")["data"]["activeTargets"]
        problems += [f"target {t['scrapeUrl']}: {t['health']} {t['lastError']}"
                     for t in targets if t["health"] != "up"]
        for title, expr in queries:
            q = urllib.parse.quote(expr)
            if not get(f"http://127.0.0.1:9090/api/v1/query?query={q}")["data"]["result"]:
                problems.append(f"panel {title!r}: no series for {expr}")
    except Exception as e:  # not up yet
        problems.append(f"{type(e).__name__}: {e}")
    if not problems:
        print(f"  API: {len(flows)} flows; {len(targets)} targets up; "
              f"{len(queries)} panel queries with series")
        break
    if time.time() > deadline:
        print("\n".join(problems), file=sys.stderr)
        sys.exit(1)
    time.sleep(5)
PY

say "compose check ok; tearing down"
