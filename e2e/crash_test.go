package e2e_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

const (
	crashRecords = 40000
	crashKills   = 10
)

// TestCrash SIGKILLs the stage at random points of the stream and restarts
// it each time; the output must hold every first occurrence exactly once.
func TestCrash(t *testing.T) {
	for _, store := range []string{"file", "kafka"} {
		t.Run(store, func(t *testing.T) { testCrash(t, store) })
	}
}

func testCrash(t *testing.T, store string) {
	sc := newScenario(t, crashRecords)
	rng, brokers, w, obs := sc.rng, sc.brokers, sc.w, sc.obs
	env := stageEnv(t, brokers, store)

	var names procSet
	p := startProc(t, names.next("dedup"), env)
	pr := startProducer(t, brokers, w, obs, 1500)
	guard := func() error { return errors.Join(pr.check(), alive(p)) }

	// One kill, at a random turn, lands as soon as the new process answers
	// /readyz 200: restored, before it has forwarded anything new. The
	// others land at output progress, but never before the process joined
	// its generation: one killed while its JoinGroup is in flight stays in
	// kfake's group for good (see waitJoined).
	startupKill := rng.IntN(crashKills)
	base := obs.progress()
	for i, at := range killPoints(rng, w.nFirsts, crashKills) {
		when := ""
		target, left := stopTarget(at, base, w.nFirsts)
		switch {
		case i == startupKill:
			waitReady(t, p, 30*time.Second)
			when = "as soon as /readyz answered 200"
		case !left:
			waitReady(t, p, 30*time.Second)
			when = "as soon as /readyz answered 200, every first occurrence already forwarded"
		default:
			waitJoined(t, p, 30*time.Second, guard)
			obs.waitProgress(t, 60*time.Second, target, fmt.Sprintf("the output to reach kill point %d (%d keys)", i+1, target), guard)
			when = fmt.Sprintf("at %d keys forwarded", target)
		}
		up := time.Since(p.started)
		p.kill(t)
		t.Logf("SIGKILL %d/%d: %s after %s, %s; %d output records, %d of %d input records produced",
			i+1, crashKills, p.name, up.Round(time.Millisecond), when, obs.count(), pr.produced.Load(), len(w.recs))
		p = startProc(t, names.next("dedup"), env)
		base = obs.progress()
	}

	sc.finish(t, pr, guard, 60*time.Second, p)
}

// stopTarget is the output progress (distinct keys) that a kill or stop at
// stop point at waits for: at least at, and at least one first occurrence
// more than the incarnation found (base), so that the stop interrupts a
// stage at work. left is false when the output already holds all nFirsts
// first occurrences (the stage can outrun the stop points): none is left
// to wait for, and the caller stops the stage once it is ready instead of
// waiting for progress that cannot come.
func stopTarget(at int, base int64, nFirsts int) (target int64, left bool) {
	if base >= int64(nFirsts) {
		return 0, false
	}
	return max(int64(at), base+1), true
}

// killPoints returns k distinct output counts, sorted, spread at random over
// 3%..90% of the expected output. Two points close together kill the stage
// again soon after a restart, maybe while it is still restoring.
func killPoints(rng *rand.Rand, expected, k int) []int {
	lo, hi := expected*3/100, expected*90/100
	seen := map[int]bool{}
	var pts []int
	for len(pts) < k {
		v := lo + rng.IntN(hi-lo)
		if !seen[v] {
			seen[v] = true
			pts = append(pts, v)
		}
	}
	slices.Sort(pts)
	return pts
}

func TestStopTarget(t *testing.T) {
	for _, tc := range []struct {
		at       int
		base     int64
		nFirsts  int
		want     int64
		wantLeft bool
	}{
		{at: 500, base: 100, nFirsts: 1000, want: 500, wantLeft: true},  // the stop point itself
		{at: 500, base: 700, nFirsts: 1000, want: 701, wantLeft: true},  // one more than found
		{at: 500, base: 999, nFirsts: 1000, want: 1000, wantLeft: true}, // the last first occurrence
		{at: 500, base: 1000, nFirsts: 1000, wantLeft: false},           // nothing left to wait for
	} {
		got, left := stopTarget(tc.at, tc.base, tc.nFirsts)
		if got != tc.want || left != tc.wantLeft {
			t.Errorf("stopTarget(%d, %d, %d) = %d, %v; want %d, %v", tc.at, tc.base, tc.nFirsts, got, left, tc.want, tc.wantLeft)
		}
	}
}
