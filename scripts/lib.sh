# Shared by the scripts that run `kplane up` (console-test, api-fuzz, tls-test): source it
# from the repository's root.

# The path of the `kplane` binary of the test build, built first if needed: the binary
# `cargo nextest run --workspace` made. (`cargo build` alone would build every crate again:
# without the dev-dependencies, features unify differently.)
test_binary() {
    local out
    if ! out=$(cargo test --workspace --locked --no-run --quiet 2>&1); then
        echo "$out" >&2
        return 1
    fi
    echo "${CARGO_TARGET_DIR:-target}/debug/kplane"
}

# A free TCP port on loopback.
free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# The console URL (with its token) `kplane up` printed to LOG, waiting up to 30 s; fails
# showing LOG if it printed none.
console_url() {
    local log=$1 url=""
    for _ in $(seq 1 150); do
        url=$(grep -o 'http://[^ ]*#token=[a-z0-9_]*' "$log" || true)
        [[ -n $url ]] && break
        sleep 0.2
    done
    [[ -n $url ]] || { cat "$log" >&2; echo "kplane up printed no console URL" >&2; return 1; }
    echo "$url"
}
