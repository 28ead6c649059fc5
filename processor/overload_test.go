package processor

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"dedup/rotation"
)

// TestStageOverload runs the stage in fingerprint mode, sized for n keys
// per window, with 2n and 5n distinct keys in one window, each followed
// closely by duplicates of keys just added. A fingerprint generation
// refuses inserts near 1.06n; the refused keys go to its exact stash and,
// when that is full, the pair rotates early. Nothing is lost for it: every
// first occurrence is forwarded except at most the model's false drops, the
// duplicates of recent keys are dropped, and the overload shows in the
// metrics. A restart restores the overloaded pair without adding its
// cumulative counts to the new assignment's counters.
func TestStageOverload(t *testing.T) {
	const n = 2000
	for _, load := range []int{2, 5} {
		t.Run(fmt.Sprintf("%dx", load), func(t *testing.T) {
			testStageOverload(t, n, load)
		})
	}
}

func testStageOverload(t *testing.T, n, load int) {
	e := newTestEnv(t, 1, 1)
	group := fmt.Sprintf("overload-%d", load)
	o := e.options(group)
	o.Filter = rotation.Options{ExpectedKeys: uint64(n), FPRate: 1e-6, Window: time.Hour, Mode: rotation.Fingerprint}
	o.Store = fileStore(t, group)
	r := start(t, o)
	out := e.collect()

	// Every key is new once; every 10th record is followed by a duplicate of
	// a key added 5 records earlier, long before any early rotation can
	// forget it (a generation holds over n keys).
	const dupEvery, dupBack = 10, 5
	keys := load * n
	key := func(i int) string { return fmt.Sprintf("key-%d", i) }
	var batch []*kgo.Record
	dups := 0
	for i := range keys {
		batch = append(batch, rec(0, key(i), "first-"+key(i), t0))
		if i%dupEvery == dupEvery-1 {
			batch = append(batch, rec(0, key(i-dupBack), "dup-"+key(i-dupBack), t0))
			dups++
		}
		if len(batch) >= 500 {
			e.produce(batch...)
			batch = batch[:0]
		}
	}
	e.produce(append(batch, sentinels(1, t0)...)...)
	recs := withoutSentinels(out.untilSentinels(1))

	forwarded := map[string]int{}
	for _, rc := range recs {
		if strings.HasPrefix(rc.Value, "dup-") {
			t.Errorf("duplicate %s of a key added %d records earlier was forwarded", rc.Value, dupBack)
		}
		forwarded[rc.Key]++
	}
	lost := 0
	for i := range keys {
		switch forwarded[key(i)] {
		case 0:
			lost++
		case 1:
		default:
			t.Errorf("%s forwarded %d times", key(i), forwarded[key(i)])
		}
	}
	// A generation holds at most its slots and its stash (under 10 % of the
	// slots here), so the model at 1.1× the slots bounds the pair's rate at
	// any moment; allow four standard deviations above the expectation.
	p, err := rotation.New(o.Filter)
	if err != nil {
		t.Fatal(err)
	}
	worst, err := rotation.PairRate(o.Filter, 1.1*float64(p.Stats().Current.M))
	if err != nil {
		t.Fatal(err)
	}
	mean := worst * float64(keys)
	if allowed := int(math.Ceil(mean + 4*math.Sqrt(mean))); lost > allowed {
		t.Errorf("%d of %d first occurrences dropped; the model allows %d (expected %.3g)", lost, keys, allowed, mean)
	}

	m := r.p.metrics
	counter := func(name string) float64 {
		switch name {
		case "overflow":
			return metricValue(m.Overflows.WithLabelValues(inTopic, "0"))
		case "early":
			return metricValue(m.EarlyRotations.WithLabelValues(inTopic, "0"))
		case "forgotten":
			return metricValue(m.ForgottenKeys.WithLabelValues(inTopic, "0"))
		}
		return metricValue(m.Rotations.WithLabelValues(inTopic, "0"))
	}
	eventually(t, 10*time.Second, "counters published", func() bool {
		return metricValue(m.Messages.WithLabelValues(inTopic, "0", OutcomeDuplicate)) == float64(dups+lost) &&
			counter("early") > 0
	})
	if counter("overflow") == 0 {
		t.Errorf("at %dx the design load: overflows %v, early rotations %v; want both > 0", load, counter("overflow"), counter("early"))
	}
	// An early rotation makes the generation whose stash filled the
	// previous one; nothing has rotated it away since.
	if v := metricValue(m.Stashed.WithLabelValues(inTopic, "0", "previous")); v == 0 {
		t.Errorf("dedup_filter_stashed{generation=\"previous\"} = 0 after %v early rotations", counter("early"))
	}
	// Early rotations are not window rotations: every record is in one window.
	if v := counter("rotations"); v != 0 {
		t.Errorf("dedup_rotations_total = %v, want 0 (one window)", v)
	}
	// Each early rotation forgets the previous generation, which held more
	// than n keys except at the first (empty previous generation): at 2x
	// one early rotation forgets nothing, at 5x later ones forget.
	if early, forgotten := counter("early"), counter("forgotten"); forgotten < (early-1)*float64(n) || forgotten > float64(keys) {
		t.Errorf("%v early rotations forgot %v keys; want between (early-1)·n = %v and the %d keys added",
			early, forgotten, (early-1)*float64(n), keys)
	}
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}

	// The restored pair carries its cumulative overload counts; the new
	// assignment's counters start from them, not at them.
	r2 := startFresh(t, o)
	e.produce(rec(0, "after-restart", "after-restart", t0))
	out.untilValue("after-restart")
	m = r2.p.metrics
	eventually(t, 10*time.Second, "the record after the restart counted", func() bool {
		return metricValue(m.Messages.WithLabelValues(inTopic, "0", OutcomeForwarded)) >= 1
	})
	if v := metricValue(m.Restores.WithLabelValues("latest")); v != 1 {
		t.Fatalf("restores from the latest checkpoint = %v, want 1", v)
	}
	for _, name := range []string{"overflow", "early", "forgotten", "rotations"} {
		if v := counter(name); v != 0 {
			t.Errorf("after the restore: %s counter = %v, want 0 (the restored pair's counts are the baseline)", name, v)
		}
	}
}
