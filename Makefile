# stamen: one place for the commands a developer and CI run.
SWAGGER := go tool swagger
GO_TEST_FLAGS ?= -race -count=1

.PHONY: all build generate check-generated validate test unit bench run fmt vet

all: build

build:
	CGO_ENABLED=0 go build -trimpath -o bin/stamen ./cmd/stamen

run: build
	./bin/stamen

validate:
	$(SWAGGER) validate swagger.yaml

# Regenerates restapi/, gen/models and gen/client from swagger.yaml.
# swagger-layout.yaml leaves out go-swagger's server scaffold (server.go,
# configure_stamen.go), which stamen does not use.
generate:
	find restapi gen -name '*.go' -delete 2>/dev/null || true
	$(SWAGGER) generate server -q -A stamen -f swagger.yaml -t . -C swagger-layout.yaml -m gen/models
	$(SWAGGER) generate client -q -A stamen -f swagger.yaml -t . -c gen/client -m gen/models --skip-models
	go mod tidy

# Fails when the committed generated code differs from what the spec produces.
check-generated: generate
	git diff --exit-code -- restapi gen go.mod go.sum
	test -z "$$(git status --porcelain -- restapi gen)"

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
