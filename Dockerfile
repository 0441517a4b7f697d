# syntax=docker/dockerfile:1.7
# a2a-gateway and a2a-worker in one image (docs/deployment.md).
#
#   DOCKER_BUILDKIT=1 docker build -t a2a-gateway:0.1.0 \
#     --build-arg VERSION=0.1.0 --build-arg REVISION=$(git rev-parse HEAD) .
#
# The image runs `a2a-gateway` by default; `--entrypoint /usr/local/bin/a2a-worker` runs the
# worker. Nothing at run time needs a shell: probes are HTTP (admin port) or the binaries' own
# `healthcheck` subcommand (HEALTHCHECK below, docker-compose.yml), preStop uses the kubelet's
# sleep, migrations are `a2a-gateway migrate`. (The Debian base still holds /bin/sh.)
# Base images are fully qualified: podman and buildah refuse short names without
# unqualified-search registries.

# Builder: Rust 1.95 on Debian 12 (bookworm), the same Debian as the runtime (glibc).
FROM docker.io/library/rust:1.95.0-slim-bookworm AS builder
# Recorded in the a2a_build_info metric (`commit` label) at compile time.
ARG REVISION=unknown
ENV A2A_BUILD_COMMIT=${REVISION} \
    CARGO_TERM_COLOR=never
WORKDIR /src
COPY . .
# BuildKit cache mounts keep the crates.io downloads and the target directory between builds,
# so a source change rebuilds only our crates. The binaries are copied out of the cache mount.
RUN --mount=type=cache,target=/usr/local/cargo/registry,sharing=locked \
    --mount=type=cache,target=/usr/local/cargo/git,sharing=locked \
    --mount=type=cache,target=/src/target,sharing=locked \
    cargo build --release --locked -p a2a-gateway -p a2a-worker \
    && mkdir -p /out \
    && cp target/release/a2a-gateway target/release/a2a-worker /out/

# Runtime: Debian 12 slim, pinned by point release; only the binaries and the CA certificates
# (OIDC discovery, HTTPS upstream agents and webhooks).
FROM docker.io/library/debian:12.12-slim
ARG VERSION=0.1.0
ARG REVISION=unknown
ARG SOURCE=""
LABEL org.opencontainers.image.title="a2a-gateway" \
      org.opencontainers.image.description="A2A 1.0 gateway (JSON-RPC, HTTP+JSON, gRPC) and its push-notification worker" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.source="${SOURCE}"
COPY --from=builder /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=builder /out/a2a-gateway /out/a2a-worker /usr/local/bin/
# Containers listen on every interface, IPv4 and IPv6, on the ports docs/configuration.md names.
ENV A2A_LISTEN=[::]:8080 \
    A2A_ADMIN_LISTEN=[::]:9464
# Numeric, so `runAsNonRoot` can verify it without a passwd entry.
USER 10001:10001
# Public: HTTP/1.1, h2c and gRPC. Admin: /metrics, /healthz, /readyz. Worker: /metrics, /healthz.
EXPOSE 8080 9464 9090
# The gateway's readiness (GET /readyz on A2A_ADMIN_LISTEN). A worker container (entrypoint
# a2a-worker) overrides it with `a2a-worker healthcheck`, as docker-compose.yml does.
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
    CMD ["/usr/local/bin/a2a-gateway", "healthcheck"]
ENTRYPOINT ["/usr/local/bin/a2a-gateway"]
CMD ["serve"]
