package registry

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"dedup/registry/registrytest"
)

const (
	startsFailing = "schema registry starts failing"
	answersAgain  = "schema registry answers again"
	refused       = "schema registry refused the credentials"
)

// Each way a registry fails: records stay pending, health names the URL,
// the registry comes back and the records are served, with one log line
// each way however many retries there were.
func TestOutage(t *testing.T) {
	for _, tc := range []struct {
		mode registrytest.Mode
		says string // in the health error
	}{
		{registrytest.Unavailable, "503 Service Unavailable (error code 50301)"},
		{registrytest.Hang, "Client.Timeout exceeded"},
		{registrytest.Drop, "EOF"},
		{registrytest.Stopped, "connection refused"},
	} {
		t.Run(tc.mode.String(), func(t *testing.T) {
			reg := newRegistry(t)
			id := uint32(reg.Register("orders-value", avro("Order")))
			reg.SetDown(tc.mode)
			c, logs := newClient(t, Options{URLs: []string{reg.URL()}, Timeout: 100 * time.Millisecond})

			if _, st := c.Lookup(id); st != Pending {
				t.Fatalf("Lookup = %v; want pending", st)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
			defer cancel()
			if err := c.Wait(ctx, id); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Wait during the outage: %v; want the context's deadline", err)
			}
			waitFor(t, "a few failed attempts", func() bool { return c.Stats().RequestsUnavailable >= 3 })
			err := c.Health()
			var ue *UnavailableError
			if !errors.As(err, &ue) {
				t.Fatalf("health %v; want *UnavailableError", err)
			}
			if !strings.Contains(err.Error(), reg.URL()) || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("health %q does not name %s and say %q", err, reg.URL(), tc.says)
			}
			if _, st := c.Lookup(id); st != Pending {
				t.Errorf("Lookup during the outage = %v; want pending", st)
			}
			if st := c.Stats(); st.Up || st.Waiting != 1 {
				t.Errorf("stats during the outage %+v", st)
			}

			reg.SetDown(registrytest.Up)
			if err := c.Wait(context.Background(), id); err != nil {
				t.Fatal(err)
			}
			if s, st := c.Lookup(id); st != Ready || s.ID != id {
				t.Errorf("Lookup after the outage = %v", st)
			}
			if err := c.Health(); err != nil {
				t.Errorf("health after the outage: %v", err)
			}
			if st := c.Stats(); !st.Up || st.Waiting != 0 {
				t.Errorf("stats after the outage %+v", st)
			}
			if n := logs.count(startsFailing); n != 1 {
				t.Errorf("%d %q lines; want 1", n, startsFailing)
			}
			if n := logs.count(answersAgain); n != 1 {
				t.Errorf("%d %q lines; want 1", n, answersAgain)
			}
			if !strings.Contains(logs.String(), "schema_id=1") {
				t.Errorf("the failing line does not name the id:\n%s", logs)
			}
		})
	}
}

// closedURL is the URL of a port nobody listens on.
func closedURL(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

func TestSecondURL(t *testing.T) {
	t.Run("first refuses connections", func(t *testing.T) {
		reg := newRegistry(t)
		id := uint32(reg.Register("orders-value", avro("Order")))
		id2 := uint32(reg.Register("items-value", avro("Item")))
		c, logs := newClient(t, Options{URLs: []string{closedURL(t), reg.URL()}})
		if err := c.Wait(context.Background(), id); err != nil {
			t.Fatal(err)
		}
		if _, st := c.Lookup(id); st != Ready {
			t.Fatalf("Lookup = %v", st)
		}
		if err := c.Health(); err != nil {
			t.Errorf("health: %v", err)
		}
		// The URL that answered is asked first from then on.
		if err := c.Wait(context.Background(), id2); err != nil {
			t.Fatal(err)
		}
		if st := c.Stats(); st.RequestsUnavailable != 1 || st.RequestsOK != 2 {
			t.Errorf("stats %+v; want 1 refused request, 2 answered", st)
		}
		if n := logs.count(startsFailing); n != 0 {
			t.Errorf("%d %q lines while a URL answers", n, startsFailing)
		}
	})
	// pkg/sr's own URL list would stop at the first URL's 503.
	t.Run("first answers 503", func(t *testing.T) {
		down, up := newRegistry(t), newRegistry(t)
		down.Register("orders-value", avro("Order"))
		id := uint32(up.Register("orders-value", avro("Order")))
		down.SetDown(registrytest.Unavailable)
		c, _ := newClient(t, Options{URLs: []string{down.URL(), up.URL()}})
		if err := c.Wait(context.Background(), id); err != nil {
			t.Fatal(err)
		}
		if _, st := c.Lookup(id); st != Ready {
			t.Fatalf("Lookup = %v", st)
		}
		if down.Requests("/") != 1 || up.Requests("/") != 1 {
			t.Errorf("requests: %d to the failing URL, %d to the other; want 1 and 1", down.Requests("/"), up.Requests("/"))
		}
	})
	// A follower that lags its leader answers 40403 for the newest ids.
	t.Run("first lacks the id", func(t *testing.T) {
		behind, ahead := newRegistry(t), newRegistry(t)
		id := uint32(ahead.Register("orders-value", avro("Order")))
		c, _ := newClient(t, Options{URLs: []string{behind.URL(), ahead.URL()}})
		if err := c.Wait(context.Background(), id); err != nil {
			t.Fatal(err)
		}
		if _, st := c.Lookup(id); st != Ready {
			t.Fatalf("Lookup = %v; want ready", st)
		}
	})
	t.Run("all fail", func(t *testing.T) {
		a, b := newRegistry(t), newRegistry(t)
		id := uint32(a.Register("orders-value", avro("Order")))
		a.SetDown(registrytest.Unavailable)
		b.SetDown(registrytest.Drop)
		c, _ := newClient(t, Options{URLs: []string{a.URL(), b.URL()}})
		c.Lookup(id)
		waitFor(t, "health to fail", func() bool { return c.Health() != nil })
		var ue *UnavailableError
		if err := c.Health(); !errors.As(err, &ue) || len(ue.Failures) != 2 ||
			!strings.Contains(err.Error(), a.URL()) || !strings.Contains(err.Error(), b.URL()) {
			t.Errorf("health %v; want both URLs and their failures", err)
		}
	})
}

func TestBasicAuth(t *testing.T) {
	t.Run("right", func(t *testing.T) {
		reg := newRegistry(t)
		id := uint32(reg.Register("orders-value", avro("Order")))
		reg.SetAuth("alice", "s3cret")
		c, _ := newClient(t, Options{URLs: []string{reg.URL()}, Username: "alice", Password: "s3cret"})
		if err := c.Wait(context.Background(), id); err != nil {
			t.Fatal(err)
		}
		if _, st := c.Lookup(id); st != Ready {
			t.Fatalf("Lookup = %v", st)
		}
	})
	for _, tc := range []struct {
		name, user, pass string
		says             string
	}{
		{"wrong", "alice", "wrong", `schema registry refused the credentials of SCHEMA_REGISTRY_USERNAME "alice"`},
		{"none", "", "", "requires credentials (it answered 401 Unauthorized): set SCHEMA_REGISTRY_USERNAME and SCHEMA_REGISTRY_PASSWORD"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := newRegistry(t)
			id := uint32(reg.Register("orders-value", avro("Order")))
			reg.SetAuth("alice", "s3cret")
			c, logs := newClient(t, Options{URLs: []string{reg.URL()}, Username: tc.user, Password: tc.pass})
			c.Lookup(id)
			waitFor(t, "a few refused attempts", func() bool { return c.Stats().RequestsUnauthorized >= 3 })
			var ae *AuthError
			if err := c.Health(); !errors.As(err, &ae) || ae.StatusCode != 401 || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("health %v; want *AuthError saying %q", err, tc.says)
			}
			if tc.pass != "" && strings.Contains(c.Health().Error(), tc.pass) {
				t.Errorf("health %q shows the password", c.Health())
			}
			_, err := c.Latest(context.Background(), "orders-value")
			if !errors.As(err, &ae) {
				t.Errorf("Latest: %v; want *AuthError", err)
			}
			if _, st := c.Lookup(id); st != Pending {
				t.Errorf("Lookup = %v; want pending", st)
			}
			if n := logs.count(refused); n != 1 {
				t.Errorf("%d %q lines; want 1", n, refused)
			}
			if !strings.Contains(logs.String(), "level=ERROR") {
				t.Errorf("the refusal is not logged as an error:\n%s", logs)
			}
			// The credentials are fixed on the registry's side.
			reg.SetAuth(tc.user, tc.pass)
			if err := c.Wait(context.Background(), id); err != nil {
				t.Fatal(err)
			}
			if err := c.Health(); err != nil {
				t.Errorf("health: %v", err)
			}
			if n := logs.count(answersAgain); n != 1 {
				t.Errorf("%d %q lines; want 1", n, answersAgain)
			}
		})
	}
}

func TestTLS(t *testing.T) {
	reg := registrytest.NewTLS()
	t.Cleanup(reg.Close)
	id := uint32(reg.Register("orders-value", avro("Order")))
	if !strings.HasPrefix(reg.URL(), "https://127.0.0.1:") {
		t.Fatalf("URL %s", reg.URL())
	}
	t.Run("trusted", func(t *testing.T) {
		c, _ := newClient(t, Options{URLs: []string{reg.URL()}, TLS: reg.ClientTLS()})
		if err := c.Wait(context.Background(), id); err != nil {
			t.Fatal(err)
		}
		if _, st := c.Lookup(id); st != Ready {
			t.Fatalf("Lookup = %v", st)
		}
	})
	t.Run("unknown authority", func(t *testing.T) {
		c, _ := newClient(t, Options{URLs: []string{reg.URL()}})
		c.Lookup(id)
		waitFor(t, "health to fail", func() bool { return c.Health() != nil })
		var ue *UnavailableError
		if err := c.Health(); !errors.As(err, &ue) || !strings.Contains(err.Error(), "certificate") {
			t.Errorf("health %v; want *UnavailableError about the certificate", err)
		}
	})
}
