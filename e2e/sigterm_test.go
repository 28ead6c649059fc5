package e2e_test

import (
	"fmt"
	"testing"
	"time"
)

const (
	sigtermRecords = 20000
	sigtermStops   = 3
)

// TestSigterm stops the stage with SIGTERM in the middle of the stream: each
// stop must end in exit 0 within SHUTDOWN_TIMEOUT, and after the restarts
// the output holds every first occurrence exactly once.
func TestSigterm(t *testing.T) {
	rng := newRand(testSeed(t))
	_, brokers := newCluster(t)
	w := newWorkload(rng, sigtermRecords, time.Now().Truncate(time.Millisecond))
	obs := startObserver(t, brokers)
	env := stageEnv(t, brokers, "file")

	var names procSet
	p := startProc(t, names.next("dedup"), env)
	guard := func() error { return alive(p) }
	pr := startProducer(t, brokers, w, obs, 1500)

	for i, at := range killPoints(rng, w.nFirsts, sigtermStops) {
		obs.waitCount(t, 60*time.Second, int64(at), fmt.Sprintf("the output to reach stop point %d (%d records)", i+1, at), guard)
		t.Logf("SIGTERM %d/%d: %s at %d output records, %d input produced", i+1, sigtermStops, p.name, obs.count(), pr.produced.Load())
		p.termOK(t)
		p = startProc(t, names.next("dedup"), env)
	}

	pr.waitDone(t, 90*time.Second, guard)
	obs.waitSentinels(t, 60*time.Second, guard)
	waitLagZero(t, p)
	p.termOK(t)
	verify(t, w, obs.drain(t, brokers))
}
