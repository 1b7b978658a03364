# A small image that runs `onceflow serve`: a static binary on a distroless base, as a
# non-root user. Mount the workflow files at /workflows; the SQLite database lives in the
# volume /data (or set ONCEFLOW_DB to a postgres:// URL).
#
#   docker build -t onceflow --build-arg VERSION=v1.0.0 .
#   docker run -p 8080:8080 -v "$PWD/examples:/workflows:ro" -v onceflow-data:/data \
#     -e ONCEFLOW_API_TOKENS=ops:admin:... onceflow

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w -X github.com/onceflow/onceflow/cmd/onceflow/internal/cli.version=${VERSION}" \
      -o /out/onceflow ./cmd/onceflow \
 && mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/onceflow /usr/local/bin/onceflow
COPY --from=build --chown=65532:65532 /out/data /data
USER nonroot:nonroot
ENV ONCEFLOW_DB=sqlite:///data/onceflow.db
VOLUME /data
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/onceflow"]
CMD ["serve", "--addr", "0.0.0.0:8080", "--workflows", "/workflows"]
