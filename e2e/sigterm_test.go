package e2e_test

import (
	"errors"
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
	sc := newScenario(t, sigtermRecords)
	rng, brokers, w, obs := sc.rng, sc.brokers, sc.w, sc.obs
	env := stageEnv(t, brokers, "file")

	var names procSet
	p := startProc(t, names.next("dedup"), env)
	pr := startProducer(t, brokers, w, obs, 1500)
	guard := func() error { return errors.Join(pr.check(), alive(p)) }

	base := obs.progress()
	for i, at := range killPoints(rng, w.nFirsts, sigtermStops) {
		when := "as soon as /readyz answered 200, every first occurrence already forwarded"
		if target, left := stopTarget(at, base, w.nFirsts); left {
			waitJoined(t, p, 30*time.Second, guard)
			obs.waitProgress(t, 60*time.Second, target, fmt.Sprintf("the output to reach stop point %d (%d keys)", i+1, target), guard)
			when = fmt.Sprintf("at %d keys forwarded", target)
		} else {
			waitReady(t, p, 30*time.Second)
		}
		t.Logf("SIGTERM %d/%d: %s %s, %d output records, %d input produced",
			i+1, sigtermStops, p.name, when, obs.count(), pr.produced.Load())
		p.termOK(t)
		p = startProc(t, names.next("dedup"), env)
		base = obs.progress()
	}

	sc.finish(t, pr, guard, 60*time.Second, p)
}
