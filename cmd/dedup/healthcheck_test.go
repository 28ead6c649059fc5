package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestHealthzURL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{":9464", "http://127.0.0.1:9464/healthz"},
		{"0.0.0.0:80", "http://127.0.0.1:80/healthz"},
		{"[::]:9464", "http://127.0.0.1:9464/healthz"},
		{"10.1.2.3:9464", "http://10.1.2.3:9464/healthz"},
		{"localhost:1", "http://localhost:1/healthz"},
	} {
		got, err := healthzURL(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("healthzURL(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "9464", "a:b:c"} {
		if _, err := healthzURL(bad); err == nil {
			t.Errorf("healthzURL(%q) succeeded", bad)
		}
	}
}

func TestHealthcheck(t *testing.T) {
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(status)
	}))
	defer srv.Close()
	addr := srv.Listener.Addr().String()
	lookup := func(k string) (string, bool) {
		if k == "METRICS_ADDR" {
			return addr, true
		}
		return "", false
	}
	probe := func() int {
		var out, errOut bytes.Buffer
		return run(context.Background(), []string{"healthcheck"}, lookup, &out, &errOut)
	}
	if code := probe(); code != exitOK {
		t.Fatalf("healthy server: exit %d, want %d", code, exitOK)
	}
	status = http.StatusServiceUnavailable
	if code := probe(); code != exitFailure {
		t.Fatalf("unhealthy server: exit %d, want %d", code, exitFailure)
	}
	// A closed port fails rather than hangs.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr = l.Addr().String()
	l.Close()
	if code := probe(); code != exitFailure {
		t.Fatalf("closed port: exit %d, want %d", code, exitFailure)
	}
}
