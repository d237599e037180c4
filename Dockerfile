# stamen's container image, for machines with a docker (or podman, buildah)
# engine. Where none can run, `make image` builds the same image with Go
# alone (deploy/image); docs/deploy.md says which to use.
#
#   docker buildx build --platform linux/amd64,linux/arm64 -t stamen .
#
# Multi-arch without emulation: the build stage runs on the build machine's
# platform and cross-compiles for the target's (GOARCH=$TARGETARCH).
FROM --platform=$BUILDPLATFORM golang:1.26-bookworm AS build
ARG TARGETOS=linux
ARG TARGETARCH
ARG VERSION=""
ARG COMMIT=""
ARG DATE=""
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath \
      -ldflags "-s -w -X github.com/stamen-dev/stamen/internal/version.version=${VERSION} \
        -X github.com/stamen-dev/stamen/internal/version.commit=${COMMIT} -X github.com/stamen-dev/stamen/internal/version.date=${DATE}" \
      -o /out/stamen ./cmd/stamen \
 && mkdir -p /out/data /out/tmp \
 && printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/data:/sbin/nologin\n' > /out/passwd \
 && printf 'root:x:0:\nnonroot:x:65532:\n' > /out/group

FROM scratch
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/passwd /etc/passwd
COPY --from=build /out/group /etc/group
COPY --from=build --chown=65532:65532 /out/data /data
COPY --from=build /out/tmp /tmp
COPY --from=build /out/stamen /stamen
# Defaults under Flower's names: a user's FLOWER_* or STAMEN_* replaces them.
# Without FLOWER_BASIC_AUTH (or another credential) stamen refuses to serve
# the API on 0.0.0.0 unless FLOWER_UNAUTHENTICATED_API=true.
ENV FLOWER_ADDRESS=0.0.0.0 \
    FLOWER_DB=/data/stamen.db \
    FLOWER_PERSISTENT=true \
    SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
LABEL org.opencontainers.image.title="stamen" \
      org.opencontainers.image.source="https://github.com/stamen-dev/stamen"
USER 65532:65532
WORKDIR /data
EXPOSE 5555
VOLUME /data
ENTRYPOINT ["/stamen"]
