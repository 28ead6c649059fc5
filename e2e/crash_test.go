package e2e_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

const (
	crashRecords = 30000
	crashKills   = 6
)

// TestCrash SIGKILLs the stage at random points of the stream and restarts
// it each time; the output must hold every first occurrence exactly once.
func TestCrash(t *testing.T) {
	for _, store := range []string{"file", "kafka"} {
		t.Run(store, func(t *testing.T) { testCrash(t, store) })
	}
}

func testCrash(t *testing.T, store string) {
	rng := newRand(testSeed(t))
	_, brokers := newCluster(t)
	w := newWorkload(rng, crashRecords, time.Now().Truncate(time.Millisecond))
	obs := startObserver(t, brokers)
	env := stageEnv(t, brokers, store)

	var names procSet
	p := startProc(t, names.next("dedup"), env)
	guard := func() error { return alive(p) }
	pr := startProducer(t, brokers, w, obs, 1500)

	for i, at := range killPoints(rng, w.nFirsts, crashKills) {
		obs.waitCount(t, 60*time.Second, int64(at), fmt.Sprintf("the output to reach kill point %d (%d records)", i+1, at), guard)
		up := time.Since(p.started)
		p.kill(t)
		t.Logf("SIGKILL %d/%d: %s after %s, at %d output records, %d of %d input records produced",
			i+1, crashKills, p.name, up.Round(time.Millisecond), obs.count(), pr.produced.Load(), len(w.recs))
		p = startProc(t, names.next("dedup"), env)
	}

	pr.waitDone(t, 90*time.Second, guard)
	obs.waitSentinels(t, 60*time.Second, guard)
	waitLagZero(t, p)
	p.termOK(t)
	verify(t, w, obs.drain(t, brokers))
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
