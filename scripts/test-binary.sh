#!/usr/bin/env bash
# Prints the path of the `kplane` binary of the test build, building it first if needed: the
# scripts that run `kplane up` use the binary `cargo nextest run --workspace` made. (`cargo
# build` alone would build every crate again: without the dev-dependencies, features unify
# differently.)
set -euo pipefail
cd "$(dirname "$0")/.."
if ! out=$(cargo test --workspace --locked --no-run --quiet 2>&1); then
    echo "$out" >&2
    exit 1
fi
echo "${CARGO_TARGET_DIR:-target}/debug/kplane"
