package demo

import (
	"context"
	"math"
	"regexp"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"dedup/internal/testkit"
)

// keyPattern is a key of the keyed stream (bench/workload at its minimum
// key size).
var keyPattern = regexp.MustCompile(`^[0-9a-f]{16}$`)

func TestGeneratorOptionsValidated(t *testing.T) {
	good := Options{Topic: "events", Rate: 10, DuplicateRate: 0.3, RetractRate: 0.1, UnkeyedRate: 0.1}
	if _, err := New(good); err != nil {
		t.Fatalf("valid options rejected: %v", err)
	}
	for name, mutate := range map[string]func(*Options){
		"rate":    func(o *Options) { o.Rate = 0 },
		"keys":    func(o *Options) { o.Keys = -1 },
		"dup":     func(o *Options) { o.DuplicateRate = 1.5 },
		"sum":     func(o *Options) { o.DuplicateRate, o.RetractRate, o.UnkeyedRate = 0.5, 0.4, 0.2 },
		"value":   func(o *Options) { o.ValueSize = -1 },
		"topic":   func(o *Options) { o.Topic = "" },
		"unkeyed": func(o *Options) { o.UnkeyedRate = -0.1 },
	} {
		o := good
		mutate(&o)
		if _, err := New(o); err == nil {
			t.Errorf("%s: invalid options accepted: %+v", name, o)
		}
	}
}

// TestGeneratorTraffic checks the records on the topic against the
// generator's own counts and the configured proportions.
func TestGeneratorTraffic(t *testing.T) {
	cluster := testkit.Cluster(t, 2)
	addr := cluster.ListenAddrs()[0]
	gen, err := New(Options{
		Brokers: []string{addr}, Topic: "events", Rate: 4000,
		DuplicateRate: 0.3, RetractRate: 0.1, UnkeyedRate: 0.1, ValueSize: 16,
		RetractHeader: "dedup-retract", Seed: 7, Count: 2000,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := gen.Run(context.Background()); err != nil {
		t.Fatalf("generator: %v", err)
	}
	st := gen.Stats()
	if st.Sent != 2000 || st.Fresh+st.Duplicates+st.Retractions+st.Unkeyed != st.Sent {
		t.Fatalf("kinds do not add up: %+v", st)
	}

	if n := testkit.EndOffsets(t, addr, "events", 2); n != int64(st.Sent) {
		t.Fatalf("topic holds %d records, generator says %d", n, st.Sent)
	}
	recs := testkit.ConsumeN(t, []kgo.Opt{kgo.SeedBrokers(addr)}, "events", int(st.Sent))
	var unkeyed, retract, keyed int
	byKey := make(map[string]int)
	for _, r := range recs {
		switch _, isRetract := testkit.HeaderValue(r, "dedup-retract"); {
		case len(r.Key) == 0:
			unkeyed++
		case isRetract:
			retract++
		default:
			keyed++
			byKey[string(r.Key)]++
			if !keyPattern.Match(r.Key) {
				t.Fatalf("unexpected key %q, want the workload's 16 hex digits", r.Key)
			}
		}
	}
	if unkeyed != int(st.Unkeyed) || retract != int(st.Retractions) || keyed != int(st.Fresh+st.Duplicates) {
		t.Errorf("topic: %d unkeyed, %d retractions, %d keyed; generator: %+v", unkeyed, retract, keyed, st)
	}
	// Duplicates resend keys already sent: the distinct keys are the fresh records.
	if len(byKey) != int(st.Fresh) {
		t.Errorf("%d distinct keys on the topic, want %d (fresh records)", len(byKey), st.Fresh)
	}
	// Proportions within 5 standard deviations of a binomial draw.
	n := float64(st.Sent)
	for _, c := range []struct {
		name string
		got  uint64
		p    float64
	}{{"duplicates", st.Duplicates, 0.3}, {"retractions", st.Retractions, 0.1}, {"unkeyed", st.Unkeyed, 0.1}} {
		sd := math.Sqrt(n * c.p * (1 - c.p))
		if math.Abs(float64(c.got)-n*c.p) > 5*sd {
			t.Errorf("%s: %d of %d, want about %.0f (sd %.1f)", c.name, c.got, st.Sent, n*c.p, sd)
		}
	}
}
