# fenceproxy's container image (docs/install.md):
#   docker build --build-arg VERSION=$(cat VERSION) --build-arg COMMIT=$(git rev-parse HEAD) -t fenceproxy .
#   docker run -v $PWD/fenceproxy.yaml:/etc/fenceproxy/fenceproxy.yaml:ro -p 6432:6432 fenceproxy
# The config must listen on 0.0.0.0:6432 (metrics_listen 0.0.0.0:9187) to be
# reachable from outside the container.

# Build: the same static binary as make release (scripts/build-release.sh),
# for the platform being built. pg_query_go is C: the golang image has gcc.
FROM golang:1.26-bookworm AS build
WORKDIR /src
# The lockclient modules are replaced by their directories (go.mod): their
# go.mod files are needed to download the graph.
COPY go.mod go.sum ./
COPY lockclient/go.mod lockclient/go.sum lockclient/
COPY lockclient/redislock/go.mod lockclient/redislock/go.sum lockclient/redislock/
COPY lockclient/zklock/go.mod lockclient/zklock/go.sum lockclient/zklock/
COPY lockclient/pgxfence/go.mod lockclient/pgxfence/go.sum lockclient/pgxfence/
RUN go mod download
COPY . .
ARG VERSION=
ARG COMMIT=
RUN VERSION="${VERSION:-$(cat VERSION)}" COMMIT="$COMMIT" CHECK=0 \
	scripts/build-release.sh /out "$(go env GOARCH)" \
	&& mv /out/fenceproxy-*-linux-* /out/fenceproxy \
	&& /out/fenceproxy version

# Run: no shell, no package manager, a non-root user (65532). There is no
# HEALTHCHECK: the image has nothing to run one with; probe /healthz and
# /readyz on metrics_listen from the orchestrator instead.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/fenceproxy /usr/local/bin/fenceproxy
USER nonroot:nonroot
# listen, metrics_listen
EXPOSE 6432 9187
ENTRYPOINT ["/usr/local/bin/fenceproxy"]
CMD ["serve", "--config", "/etc/fenceproxy/fenceproxy.yaml"]
