# kplane: one image, one binary, a subcommand per service.
#   docker build -t kplane .
#   docker run --rm kplane --help
# Build stage: the same toolchain as rust-toolchain.toml, the C compilers the bundled
# librdkafka, zstd and lz4 need, and the workspace's lockfile (--locked).
FROM rust:1.95.0-slim-bookworm AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends make gcc g++ pkg-config perl python3 \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin kplane \
 && cp target/release/kplane /usr/local/bin/kplane

# Runtime: Debian slim, a non-root user, the binary and the example configuration.
FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates curl \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --user-group --home-dir /var/lib/kplane --create-home kplane \
 && mkdir -p /var/lib/kplane/kplane-data && chown -R kplane:kplane /var/lib/kplane
COPY --from=build /usr/local/bin/kplane /usr/local/bin/kplane
COPY config/kplane.example.toml /etc/kplane/kplane.toml
USER 10001:10001
WORKDIR /var/lib/kplane
# Every key can be overridden with KPLANE__SECTION__KEY (docs/configuration.md); services
# must listen on 0.0.0.0 inside a container, which compose and the manifests set.
ENV KPLANE_CONFIG=/etc/kplane/kplane.toml \
    KPLANE_HEALTH_PORT=9101
# Telemetry (UDP), the API and console, and the four admin listeners.
EXPOSE 32766/udp 8080 9101 9102 9103 9104
# The admin listener of the service this container runs (set KPLANE_HEALTH_PORT per service).
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
  CMD curl -fsS "http://127.0.0.1:${KPLANE_HEALTH_PORT}/healthz" || exit 1
ENTRYPOINT ["kplane"]
CMD ["--help"]
