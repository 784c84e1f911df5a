#!/usr/bin/env bash
# CI entry point: installs what the tests need on a fresh Debian machine, then runs the
# README's test command (`make test`) after the lint gate. Safe to re-run; keeps a cargo
# target directory outside the clone so repeated runs on one machine are incremental.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$(date +%s)
step() { printf '\n==> %s (%ss)\n' "$*" "$(( $(date +%s) - started ))"; }

step "system packages"
missing=()
for pkg in make gcc pkg-config python3 perl curl; do
  command -v "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
if ((${#missing[@]})); then
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq make gcc pkg-config python3 python3-pip perl curl
fi

step "deployment validation, API fuzzing, TLS, paging and store-reading tools (kubectl, kubernetes-validate, check-jsonschema, schemathesis, duckdb, pyspark + Java 17, moto, nginx, prometheus-alertmanager, prometheus)"
if ! command -v kubectl >/dev/null 2>&1; then
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends kubernetes-client
fi
python3 -m pip install --quiet --disable-pip-version-check kubernetes-validate==1.37.0 check-jsonschema==0.39.0 schemathesis==4.32.5 duckdb==2.0.1 pyspark==4.0.1 'moto[server]==5.2.1' \
  || python3 -m pip install --quiet --disable-pip-version-check --break-system-packages kubernetes-validate==1.37.0 check-jsonschema==0.39.0 schemathesis==4.32.5 duckdb==2.0.1 pyspark==4.0.1 'moto[server]==5.2.1'
# The API fuzzing (scripts/api-fuzz.sh, Schemathesis) is always on here.
export KPLANE_REQUIRE_FUZZ=1
# DuckDB and Spark read the store beside `kplane query` (scripts/engines-check.sh), always on
# here. Spark runs on a Java 17 runtime.
export KPLANE_REQUIRE_DUCKDB=1
command -v java >/dev/null 2>&1 || {
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends openjdk-17-jre-headless procps
}
export KPLANE_REQUIRE_SPARK=1
# moto's S3 server: the store on object storage (docs/deploy.md), always on here.
export KPLANE_REQUIRE_S3=1
# nginx: the TLS terminator of scripts/tls-test.sh (deploy/tls/nginx.conf), always on here.
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || {
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nginx-light openssl
}
export KPLANE_REQUIRE_TLS=1
# Prometheus Alertmanager: incidents are paged to a real one (docs/incidents.md).
command -v prometheus-alertmanager >/dev/null 2>&1 || {
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus-alertmanager
}
# The package starts a system service where systemd runs; the tests start their own.
command -v systemctl >/dev/null 2>&1 && systemctl stop prometheus-alertmanager >/dev/null 2>&1 || true
export KPLANE_REQUIRE_ALERTMANAGER=1
# Prometheus: scrapes the compose topology's processes, and every Grafana panel's query is
# checked through its API (crates/kplane-cli/tests/e2e/compose_metrics.rs).
command -v prometheus >/dev/null 2>&1 || {
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus
}
command -v systemctl >/dev/null 2>&1 && systemctl stop prometheus >/dev/null 2>&1 || true
export KPLANE_REQUIRE_PROMETHEUS=1
# `ip` for the veth pairs and network namespaces of the AF_XDP test.
command -v ip >/dev/null 2>&1 || {
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iproute2
}

step "browser test tools (Debian chromium, node + npm for playwright-core)"
browser=()
[ -x /usr/bin/chromium ] || browser+=(chromium)
command -v node >/dev/null 2>&1 || browser+=(nodejs)
command -v npm >/dev/null 2>&1 || browser+=(npm)
if ((${#browser[@]})); then
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${browser[@]}"
fi
(cd console-test && npm ci --no-audit --no-fund --loglevel=error)
# The console test is always on here: missing tools fail it instead of skipping.
export KPLANE_REQUIRE_BROWSER=1

step "P4 toolchain (p4c, BMv2 simple_switch_grpc: ../shared/p4-toolchain)"
if ! command -v p4c >/dev/null 2>&1 || ! command -v simple_switch_grpc >/dev/null 2>&1; then
  p4tc=""
  for d in "${KPLANE_P4_TOOLCHAIN:-}" ../shared/p4-toolchain /work/shared/p4-toolchain; do
    [ -n "$d" ] && [ -x "$d/install.sh" ] && { p4tc=$d; break; }
  done
  [ -n "$p4tc" ] || { echo "no P4 toolchain found (set KPLANE_P4_TOOLCHAIN to shared/p4-toolchain)" >&2; exit 1; }
  "$p4tc/install.sh"
fi
p4c --version
# The P4 tests are always on here: a missing p4c or BMv2 fails them instead of skipping.
export KPLANE_REQUIRE_P4=1

