package e2e_test

import (
	"fmt"
	"testing"
	"time"
)

const (
	churnRecords = 40000
	churnEvents  = 12
	churnSlots   = 3
)

// TestRebalanceChurn runs up to three instances in one group with the kafka
// checkpoint store, so that state moves with partitions, and makes them join
// and leave (SIGTERM and SIGKILL mixed) while records flow; the output must
// hold every first occurrence exactly once.
func TestRebalanceChurn(t *testing.T) {
	sc := newScenario(t, churnRecords)
	rng, brokers, w, obs := sc.rng, sc.brokers, sc.w, sc.obs

	type slot struct {
		env map[string]string // own DATA_DIR, shared GROUP_ID
		p   *proc
	}
	var slots [churnSlots]slot
	for i := range slots {
		slots[i].env = stageEnv(t, brokers, "kafka")
	}
	var names procSet
	// running lists the slots whose instance the test has not stopped.
	running := func() (on, off []int) {
		for i := range slots {
			if slots[i].p != nil && !slots[i].p.stopped {
				on = append(on, i)
			} else {
				off = append(off, i)
			}
		}
		return on, off
	}
	join := func(i int) {
		slots[i].p = startProc(t, names.next(fmt.Sprintf("dedup-%c", 'A'+i)), slots[i].env)
	}
	var pr *producer
	guard := func() error {
		if pr != nil {
			if err := pr.check(); err != nil {
				return err
			}
		}
		on, _ := running()
		for _, i := range on {
			if err := alive(slots[i].p); err != nil {
				return err
			}
		}
		return nil
	}

	join(0)
	pr = startProducer(t, brokers, w, obs, 1500)
	kill := rng.IntN(2) == 0
	var joins, terms, kills int
	for i, at := range killPoints(rng, w.nFirsts, churnEvents) {
		obs.waitProgress(t, 60*time.Second, int64(at), fmt.Sprintf("the output to reach churn point %d (%d keys)", i+1, at), guard)
		on, off := running()
		live := make([]*proc, 0, len(on))
		for _, s := range on {
			live = append(live, slots[s].p)
		}
		waitSettled(t, 30*time.Second, guard, live...)
		if len(on) == 1 || (len(off) > 0 && len(on) < churnSlots && rng.IntN(2) == 0) {
			s := off[rng.IntN(len(off))]
			join(s)
			joins++
			t.Logf("churn %d/%d at %d keys forwarded: %s joins (%d running)", i+1, churnEvents, at, slots[s].p.name, len(on)+1)
			continue
		}
		p := slots[on[rng.IntN(len(on))]].p
		if kill {
			p.kill(t)
			kills++
			t.Logf("churn %d/%d at %d keys forwarded: %s SIGKILLed (%d running)", i+1, churnEvents, at, p.name, len(on)-1)
		} else {
			p.termOK(t)
			terms++
			t.Logf("churn %d/%d at %d keys forwarded: %s left with SIGTERM (%d running)", i+1, churnEvents, at, p.name, len(on)-1)
		}
		kill = !kill
	}
	_, off := running()
	for _, s := range off {
		join(s)
	}
	t.Logf("churn: %d joins, %d SIGTERM leaves, %d SIGKILLs; %d instances at the end", joins, terms, kills, churnSlots)

	pr.waitDone(t, 90*time.Second, guard)
	obs.waitSentinels(t, 60*time.Second, guard)
	// Scale-down: all three get SIGTERM at once.
	for i := range slots {
		slots[i].p.sigterm(t)
	}
	for i := range slots {
		slots[i].p.waitTermOK(t)
	}
	verify(t, w, obs.drain(t, brokers))
}
