package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"dedup/internal/config"
)

// healthcheckTimeout bounds the probe: a container runtime kills a hung
// HEALTHCHECK anyway, and a slow answer is as bad as none.
const healthcheckTimeout = 2 * time.Second

// runHealthcheck answers a container HEALTHCHECK without curl or a shell in
// the image: it GETs /healthz on this process's own METRICS_ADDR and exits 0
// on 200, 1 otherwise.
func runHealthcheck(ctx context.Context, args []string, lookup config.LookupFunc, stdout, stderr io.Writer) int {
	if code, ok := noArgs("healthcheck", args, stdout, stderr); !ok {
		return code
	}
	addr, ok := lookup("METRICS_ADDR")
	if !ok {
		addr = config.Default("METRICS_ADDR")
	}
	url, err := healthzURL(addr)
	if err != nil {
		fmt.Fprintf(stderr, "dedup healthcheck: %v\n", err)
		return exitConfig
	}
	ctx, cancel := context.WithTimeout(ctx, healthcheckTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		fmt.Fprintf(stderr, "dedup healthcheck: %v\n", err)
		return exitFailure
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "dedup healthcheck: get %s: %v\n", url, err)
		return exitFailure
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintf(stderr, "dedup healthcheck: %s answered %s: %s\n", url, resp.Status, body)
		return exitFailure
	}
	fmt.Fprintf(stdout, "ok: %s\n", url)
	return exitOK
}

// healthzURL turns a listen address into the URL a local probe can reach:
// a wildcard or empty host means loopback.
func healthzURL(listen string) (string, error) {
	if listen == "" {
		return "", fmt.Errorf("METRICS_ADDR is empty: the status server is off")
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", fmt.Errorf("parse METRICS_ADDR %q: %w", listen, err)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/healthz", nil
}
