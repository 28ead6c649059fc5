package processor

import (
	"strings"
	"testing"
)

// TestGroupBalancerOption: the balancer is named in any case; an unknown
// name is a validation error naming it.
func TestGroupBalancerOption(t *testing.T) {
	e := newTestEnv(t, 1, 1)
	for _, name := range []string{"", "sticky", "RANGE", "RoundRobin"} {
		o := e.options("balancer")
		o.GroupBalancer = name
		if _, err := New(o); err != nil {
			t.Errorf("GroupBalancer %q: %v", name, err)
		}
	}
	o := e.options("balancer")
	o.GroupBalancer = "cooperative-sticky"
	if _, err := New(o); err == nil || !strings.Contains(err.Error(), "cooperative-sticky") {
		t.Errorf("GroupBalancer cooperative-sticky: got %v, want an error naming it", err)
	}
}
