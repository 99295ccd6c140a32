# Multi-stage build: a static binary on a distroless base, run as non-root.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# The production binary: no build tags (the unsafeguards tag is for tests).
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/redlock-proxy ./cmd/redlock-proxy

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/redlock-proxy /usr/local/bin/redlock-proxy
COPY config.toml /etc/redlock-proxy/config.toml
USER nonroot:nonroot
EXPOSE 6380
ENTRYPOINT ["/usr/local/bin/redlock-proxy", "-config", "/etc/redlock-proxy/config.toml"]
