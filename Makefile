# stamen: one place for the commands a developer and CI run.
SWAGGER := go tool swagger
GO_TEST_FLAGS ?= -race -count=1

.PHONY: all build generate check-generated ui-generate ui check-ui screenshots docs check-docs validate test unit bench run fmt vet image dist

all: build

build:
	CGO_ENABLED=0 go build -trimpath -o bin/stamen ./cmd/stamen

run: build
	./bin/stamen

validate:
	$(SWAGGER) validate swagger.yaml

# Regenerates restapi/, gen/models and gen/client from swagger.yaml.
# swagger-layout.yaml leaves out go-swagger's server scaffold (server.go,
# configure_stamen.go), which stamen does not use, and writes
# handlers/operations_gen.go, which installs each operation's handler.
generate:
	find restapi gen -name '*.go' -delete 2>/dev/null || true
	rm -f handlers/operations_gen.go
	$(SWAGGER) generate server -q -A stamen -f swagger.yaml -t . -C swagger-layout.yaml -m gen/models
	$(SWAGGER) generate client -q -A stamen -f swagger.yaml -t . -c gen/client -m gen/models --skip-models
	go mod tidy
	$(MAKE) --no-print-directory ui-generate

# The dashboard's TypeScript types (web/src/api/schema.d.ts), the spec's
# second generated SDK: Swagger 2.0 converted to OpenAPI 3
# (swagger2openapi), then openapi-typescript; the page calls the API
# through openapi-fetch with them, so a call that leaves the spec fails
# `make ui`. Tools from web/package-lock.json.
ui-generate:
	cd web && npm ci --no-audit --no-fund --loglevel=error && npm run --silent generate

# Fails when the committed generated code differs from what the spec produces.
check-generated: generate
	git diff --exit-code -- restapi gen handlers/operations_gen.go go.mod go.sum web/src/api
	test -z "$$(git status --porcelain -- restapi gen handlers/operations_gen.go web/src/api)"

# Rebuilds the dashboard (web/) into internal/ui/dist, which the binary
# embeds: the exact tools of web/package-lock.json (npm ci), a type check
# against the generated API types, then vite build. Node is needed here
# only; the built files are committed.
ui:
	cd web && npm ci --no-audit --no-fund --loglevel=error && npm run --silent build

# Retakes docs/screenshots/*.png (each page, light and dark) from the
# dashboard's browser test against a real worker.
screenshots:
	STAMEN_INTEGRATION=1 STAMEN_SCREENSHOTS=$(CURDIR)/docs/screenshots go test -count=1 -run 'TestDashboardRedis|TestDashboardRoles' ./internal/ui

# Fails when the committed build differs from what web/ builds.
check-ui: ui
	git diff --exit-code -- internal/ui/dist
	test -z "$$(git status --porcelain -- internal/ui/dist)"

# Regenerates docs/configuration.md from the flag definitions
# (cmd/stamen's TestConfigurationDoc writes it). Run it after adding or
# changing a flag.
docs:
	STAMEN_WRITE_DOCS=1 go test -count=1 -run '^TestConfigurationDoc$$' ./cmd/stamen/

# Fails when the committed docs/configuration.md differs from the flags.
check-docs: docs
	git diff --exit-code -- docs/configuration.md
	test -z "$$(git status --porcelain -- docs/configuration.md)"

fmt:
	gofmt -l -w $$(git ls-files '*.go' | grep -v '^gen/\|^restapi/')

vet:
	go vet ./...

unit:
	go test $(GO_TEST_FLAGS) -short ./...

# The test command of the README: installs and starts what the tests need
# (Redis, RabbitMQ, Debian's Celery), then runs every test.
test:
	bash scripts/test.sh

bench:
	bash scripts/bench.sh

# The version stamped into release builds: the tag, else the commit.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
DATE ?= $(shell git log -1 --format=%cI 2>/dev/null || echo unknown)
VERSION_PKG := github.com/stamen-dev/stamen/internal/version
LDFLAGS := -s -w -X $(VERSION_PKG).version=$(VERSION) -X $(VERSION_PKG).commit=$(COMMIT) -X $(VERSION_PKG).date=$(DATE)
PLATFORMS ?= linux/amd64 linux/arm64 darwin/amd64 darwin/arm64

# Static release binaries for every platform, with their SHA-256 sums.
dist:
	rm -rf dist/bin && mkdir -p dist/bin
	set -e; for p in $(PLATFORMS); do \
	  os=$${p%/*}; arch=$${p#*/}; \
	  CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch go build -trimpath -ldflags "$(LDFLAGS)" \
	    -o dist/bin/stamen-$(VERSION)-$$os-$$arch ./cmd/stamen; \
	done
	cd dist/bin && sha256sum stamen-* > SHA256SUMS

# The container image (OCI layout in dist/image, amd64 and arm64) without a
# container engine: see deploy/image and docs/deploy.md. IMAGE_TAR also
# writes the first platform's image as a tarball docker load takes.
IMAGE_TAR ?=
image:
	go run ./deploy/image -o dist/image -platforms linux/amd64,linux/arm64 -version $(VERSION) -commit $(COMMIT) -date $(DATE) -tag stamen:$(VERSION) $(if $(IMAGE_TAR),-tar $(IMAGE_TAR))
