# capbridge's container image, for those who build with docker or podman:
#
#	docker build -t capbridge .
#
# Without a container daemon, `make image` builds the same image with
# deploy/image (capbridge on an empty base, user 65532, entrypoint
# capbridge): see docs/operating.md. A test holds the final stage below to
# the same user, entrypoint and working directory.

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# Static: the final stage has no libc. The build info stamps the module
# version and commit that `capbridge version` prints; -buildvcs=auto leaves
# them out when the build context has no .git.
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=auto -o /out/capbridge ./cmd/capbridge

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/capbridge /usr/local/bin/capbridge
USER 65532:65532
WORKDIR /home/nonroot
ENTRYPOINT ["/usr/local/bin/capbridge"]
CMD ["serve"]
