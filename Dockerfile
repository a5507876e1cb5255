# Multi-stage build of the image manifests/manager/deployment.yaml names:
#   docker build -t ghcr.io/vidra-operator/vidra:v0.1.0 .
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY cmd/ cmd/
COPY internal/ internal/
COPY pkg/ pkg/
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /vidra ./cmd/vidra

# distroless: no shell, no package manager; runs as the nonroot user 65532.
FROM gcr.io/distroless/static:nonroot
COPY --from=build /vidra /vidra
USER 65532:65532
ENTRYPOINT ["/vidra"]
