.PHONY: test run build bench

# The one command that runs the tests (the README's second command; .ci/run calls it).
test:
	go test -race -timeout 30m ./...

# The one command that runs the processor on its embedded broker (the README's first command).
run:
	go run ./cmd/dedup

build:
	CGO_ENABLED=0 go build -o dedup ./cmd/dedup
