#!/usr/bin/env bash
# Builds the Dockerfile with podman (no Docker engine needed) and checks the image: the
# binary runs, the collector starts as the non-root user, its HEALTHCHECK passes, and
# telemetry sent to it (the image's own emulator) is decoded.
#
#   scripts/image-check.sh                # base images pulled from the registry
#   scripts/image-check.sh --local-bases  # no registry reachable: debian:bookworm-slim made
#                                         # with debootstrap, rust:1.95.0-slim-bookworm = that
#                                         # + this host's toolchain and CA bundle
#
# Needs root, podman and runc (and debootstrap for --local-bases):
#   apt-get install podman runc debootstrap
# KPLANE_IMAGE names the image (default localhost/kplane:dev).
set -euo pipefail
cd "$(dirname "$0")/.."

image=${KPLANE_IMAGE:-localhost/kplane:dev}
debian=docker.io/library/debian:bookworm-slim
rust=docker.io/library/rust:1.95.0-slim-bookworm
# runc copes with hybrid cgroup hierarchies (crun refuses them); limits are set to what this
# process has, which a container runtime without CAP_SYS_RESOURCE cannot raise.
podman=(podman --runtime runc)
limits=(--ulimit "nofile=$(ulimit -Hn):$(ulimit -Hn)" --ulimit nproc=4096:4096)

local_bases() {
  local work toolchain
  work=$(mktemp -d /tmp/kplane-image.XXXXXX)
  trap 'rm -rf "$work"' RETURN
  echo "== debian:bookworm-slim from debootstrap"
  debootstrap --variant=minbase bookworm "$work/debian" http://deb.debian.org/debian >/dev/null
  tar -C "$work/debian" -c . | "${podman[@]}" import -q - "$debian" >/dev/null
  echo "== rust:1.95.0-slim-bookworm: that, this host's 1.95.0 toolchain and CA bundle"
  toolchain=$(dirname "$(dirname "$(rustup +1.95.0 which rustc)")")
  mkdir -p "$work/debian/usr/local/rust" "$work/debian/usr/local/cargo/bin"
  cp -a "$toolchain"/{bin,lib,libexec,etc} "$work/debian/usr/local/rust/"
  for b in cargo rustc rustdoc; do
    ln -sf "/usr/local/rust/bin/$b" "$work/debian/usr/local/cargo/bin/$b"
  done
  # An egress proxy that re-signs TLS (crates.io) is trusted inside the build as here.
  mkdir -p "$work/debian/etc/ssl/certs"
  cp -L /etc/ssl/certs/ca-certificates.crt "$work/debian/etc/ssl/certs/"
  tar -C "$work/debian" -c . | "${podman[@]}" import -q \
    --change 'ENV PATH=/usr/local/cargo/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV CARGO_HOME=/usr/local/cargo' - "$rust" >/dev/null
}

[ "${1:-}" = --local-bases ] && local_bases

echo "== podman build -t $image ."
start=$(date +%s)
"${podman[@]}" build --format docker --network host "${limits[@]}" -t "$image" .
echo "built in $(( $(date +%s) - start )) s: $("${podman[@]}" image inspect --format '{{.Size}}' "$image") bytes"

echo "== the image runs"
"${podman[@]}" run --rm --no-healthcheck "${limits[@]}" "$image" --version

name=kplane-image-check
udp=$(( 20000 + RANDOM % 10000 ))
admin=$(( udp + 1 ))
"${podman[@]}" rm -f "$name" >/dev/null 2>&1 || true
trap '"${podman[@]}" rm -f "$name" >/dev/null 2>&1 || true' EXIT
# The image's HEALTHCHECK, run by hand below (podman's timer needs systemd).
"${podman[@]}" run -d --name "$name" --network host "${limits[@]}" --health-interval disable \
  -e KPLANE_HEALTH_PORT="$admin" "$image" \
  collector --listen "127.0.0.1:$udp" --admin "127.0.0.1:$admin" >/dev/null

echo "== the collector's HEALTHCHECK"
for _ in $(seq 60); do
  "${podman[@]}" healthcheck run "$name" >/dev/null 2>&1 && break
  sleep 0.5
done
"${podman[@]}" healthcheck run "$name"
echo "healthy"
uid=$("${podman[@]}" exec "$name" id -u)
[ "$uid" = 10001 ] || { echo "runs as uid $uid, not 10001" >&2; exit 1; }
echo "runs as uid $uid"

echo "== telemetry through the collector in the image"
"${podman[@]}" exec "$name" kplane emulate --collector "127.0.0.1:$udp" --duration 1s >/dev/null
decoded=$(curl -fsS "http://127.0.0.1:$admin/metrics" |
  awk '/^kplane_collector_reports_decoded_total/ { n += $NF } END { print n + 0 }')
[ "$decoded" -gt 0 ] || { echo "the collector decoded nothing" >&2; exit 1; }
echo "decoded $decoded reports"
echo "image check ok: $image"
