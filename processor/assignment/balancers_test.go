package assignment

import (
	"testing"

	"github.com/segmentio/kafka-go"
)

func TestBalancers(t *testing.T) {
	for _, c := range []struct {
		name      string
		protocols []string
		sticky    bool
	}{
		{NameSticky, []string{ProtocolName, "range"}, true},
		{NameRange, []string{"range"}, false},
		{NameRoundRobin, []string{"roundrobin"}, false},
	} {
		bs, s, err := Balancers(c.name, nil)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var got []string
		for _, b := range bs {
			got = append(got, b.ProtocolName())
		}
		if len(got) != len(c.protocols) || (s != nil) != c.sticky {
			t.Fatalf("%s: protocols %v, sticky %v; want %v, %v", c.name, got, s != nil, c.protocols, c.sticky)
		}
		for i := range got {
			if got[i] != c.protocols[i] {
				t.Fatalf("%s: protocols %v, want %v", c.name, got, c.protocols)
			}
		}
		if c.sticky && bs[0] != kafka.GroupBalancer(s) {
			t.Fatalf("%s: the Sticky returned is not the one offered", c.name)
		}
	}
	if _, _, err := Balancers(DefaultName, nil); err != nil {
		t.Fatalf("default %q refused: %v", DefaultName, err)
	}
	for _, bad := range []string{"", "Sticky", "cooperative-sticky", "round-robin"} {
		if _, _, err := Balancers(bad, nil); err == nil {
			t.Errorf("Balancers(%q) accepted", bad)
		}
	}
}
