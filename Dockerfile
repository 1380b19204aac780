# syntax=docker/dockerfile:1
# vmipam's controller image, for CI systems with a container runtime. `make image` builds the
# same image without one (hack/image, go-containerregistry): static binary, -trimpath, version
# stamped, distroless static base, user 65532.
#
#   docker build --build-arg VERSION=v0.1.0 -t ghcr.io/vmipam/ipam-controller:v0.1.0 .
ARG GO_VERSION=1.26

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build
ARG TARGETOS=linux
ARG TARGETARCH
ARG VERSION=dev
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} \
    go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/ipam-controller ./cmd/ipam-controller

FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=dev
LABEL org.opencontainers.image.title="vmipam ipam-controller" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.source="https://github.com/vmipam/vmipam"
COPY --from=build /out/ipam-controller /ipam-controller
USER 65532:65532
ENTRYPOINT ["/ipam-controller"]
