package e2e_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// nemesisCase is one fault of the nemesis suite: how many stage instances
// share the group, how large the stream is, at how many points of it the
// fault strikes, and what striking means. docs/nemesis.md describes each.
type nemesisCase struct {
	name    string
	members int
	records int
	points  int
	// Broker features the fault needs: a data directory (the broker
	// restarts), the produce-ack loser, the fetch fault.
	persist, ackLoss, fetchFaults bool
	// inject strikes once, at point i, and says what it did.
	inject func(r *nemesisRun, i int) string
}

// pauseProgress is how many more first occurrences the new owner must
// forward while a paused member sleeps, before it wakes: the paused member
// holds records it fetched before the pause, which the new owner forwards
// meanwhile.
const pauseProgress = 300

// Input pacing. The producer releases nemesisRate records per second, so
// that every fault strikes a stage at work rather than one that drained a
// burst; and it never runs more than holdLead records past the position the
// run waits for next (nemesisRun.hold), so that the stream cannot end
// before the last injection however slowly the faults play out.
const (
	nemesisRate = 800
	holdLead    = 1000
)

// reserve is how many input records each injection still to come is sure to
// find unreleased. Holds and bursts push the input forward at every point,
// by up to holdLead plus burstSize records once the stage has overtaken the
// points drawn: without a reserve, a stream could run out before its last
// point, where an injection that needs output to strike (a lost
// acknowledgement) would wait in vain.
const reserve = 300

// nemesisRecords is the stream of every case: at nemesisRate, about 20 s
// of input.
const nemesisRecords = 16000

var nemeses = []nemesisCase{
	{name: "sigkill", members: 2, records: nemesisRecords, points: 6, inject: injectKill},
	{name: "sigstop", members: 2, records: nemesisRecords, points: 4, inject: injectPause},
	{name: "lost-ack", members: 1, records: nemesisRecords, points: 8, ackLoss: true, inject: injectLostAck},
	{name: "broker-restart", members: 2, records: nemesisRecords, points: 4, persist: true, inject: injectBrokerRestart},
	{name: "empty-slow-fetch", members: 1, records: nemesisRecords, points: 4, fetchFaults: true, inject: injectFetchFaults},
	{name: "rolling-restart", members: 3, records: nemesisRecords, points: 3, inject: injectRollingRestart},
}

// TestNemesis drives the built binary through each fault of the nemesis
// suite with both checkpoint stores, each fault struck at several points of
// the stream, and checks after each run that every first occurrence is in
// the output exactly once. One case: go test -run 'TestNemesis/lost-ack/kafka' ./e2e
func TestNemesis(t *testing.T) {
	needsKfake(t, "fault injection: lost acknowledgements and empty or slow fetches (ControlKey), restarts from a data directory (kfake.DataDir), the group's state (GroupInfo)")
	for _, nc := range nemeses {
		for _, store := range []string{"kafka", "file"} {
			t.Run(nc.name+"/"+store, func(t *testing.T) {
				t.Parallel()
				runNemesis(t, nc, store)
			})
		}
	}
}

// member is one stage instance of the group, restarted under the same
// environment as often as the fault asks.
type member struct {
	name string
	env  map[string]string
	p    *proc
}

// nemesisRun is one run of a nemesis case: the broker, the stream, the
// group's members and the armed faults.
type nemesisRun struct {
	t       *testing.T
	nc      nemesisCase
	rng     *rand.Rand
	b       *restartable
	brokers string
	w       *workload
	obs     *observer
	pr      *producer
	members []*member
	names   procSet
	exits   int
	loser   *ackLoser
	fetch   *fetchFault
	// open is how far the input may be produced now: all of it but the
	// reserve of the injections still to come.
	open int64
}

func runNemesis(t *testing.T, nc nemesisCase, store string) {
	began := time.Now()
	r := &nemesisRun{t: t, nc: nc, rng: newRand(testSeed(t))}
	var opts []kfake.Opt
	if nc.persist {
		opts = append(opts, kfake.DataDir(t.TempDir()))
	}
	r.b, r.brokers = newRestartable(t, opts...)
	if nc.ackLoss {
		l, err := newAckLoser(r.brokers)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(l.close)
		r.loser = l
		r.b.onOpen = append(r.b.onOpen, l.install)
	}
	if nc.fetchFaults {
		r.fetch = &fetchFault{}
		r.b.onOpen = append(r.b.onOpen, r.fetch.install)
	}
	r.b.open(t)

	// A run cut short by a failed wait still reports what the output
	// holds. Registered before any process starts, this runs after their
	// cleanups killed them.
	checked := false
	t.Cleanup(func() {
		if !checked {
			r.report(store, began, "run cut short")
		}
	})

	r.w = newWorkload(r.rng, nc.records, time.Now().Truncate(time.Millisecond))
	r.obs = startObserver(t, r.brokers)
	base := stageEnv(t, r.brokers, store)
	for i := range nc.members {
		env := cloneEnv(base)
		// Each instance has its own DATA_DIR; with the file store they
		// share CHECKPOINT_DIR, the shared volume the store requires
		// for more than one instance.
		env["DATA_DIR"] = t.TempDir()
		m := &member{name: fmt.Sprintf("dedup-%c", 'A'+i), env: env}
		r.start(m)
		r.members = append(r.members, m)
	}
	r.pr = startPacedProducer(t, r.brokers, r.w, r.obs, 1500, nemesisRate)
	r.pr.limit.Store(0)

	done := r.obs.progress()
	// Points spread over 2%..72% of the first occurrences: the input
	// held back for later points and released in bursts must leave a
	// stream in flight at the last one.
	for i, at := range killPoints(r.rng, r.w.nFirsts*80/100, nc.points) {
		r.open = r.released(i)
		where := "with every first occurrence already forwarded"
		if target, left := stopTarget(at, done, r.w.nFirsts); left {
			target = r.hold(target)
			r.obs.waitProgress(t, 90*time.Second, target, fmt.Sprintf("the output to reach point %d (%d keys)", i+1, target), r.guard)
			where = fmt.Sprintf("at %d keys forwarded", target)
		}
		r.settle()
		r.open = r.released(i + 1)
		what := nc.inject(r, i)
		t.Logf("%s %d/%d %s: %s; %d output records, %d of %d input records produced",
			nc.name, i+1, nc.points, where, what, r.obs.count(), r.pr.produced.Load(), len(r.w.recs))
		done = r.obs.progress()
	}

	r.pr.limit.Store(int64(len(r.w.recs)))
	r.pr.waitDone(t, 120*time.Second, r.guard)
	r.obs.waitSentinels(t, 120*time.Second, r.guard)
	r.settle()
	for _, m := range r.members {
		m.p.sigterm(t)
	}
	for _, m := range r.members {
		m.p.waitTermOK(t)
	}
	checked = true
	r.report(store, began, "")
}

// report runs the checker and logs its one-line summary; a run that was not
// exactly once fails with examples.
func (r *nemesisRun) report(store string, began time.Time, note string) {
	t := r.t
	ty, err := checkExactlyOnce(r.brokers)
	if err != nil {
		t.Errorf("nemesis %s store=%s: check: %v", r.nc.name, store, err)
		return
	}
	if note != "" {
		note = " (" + note + ")"
	}
	t.Logf("nemesis %s store=%s: %s points=%d took=%s%s", r.nc.name, store, ty, r.nc.points, time.Since(began).Round(time.Second), note)
	if ty.inputs != len(r.w.recs) || ty.firsts != r.w.nFirsts {
		t.Errorf("the input topic holds %d records with %d first occurrences; the generator wrote %d with %d",
			ty.inputs, ty.firsts, len(r.w.recs), r.w.nFirsts)
	}
	if !ty.ok() {
		shown := ty.examples[:min(len(ty.examples), 15)]
		t.Errorf("not exactly once: %d lost, %d duplicated; first %d:\n  %s", ty.lost, ty.duplicated, len(shown), strings.Join(shown, "\n  "))
	}
}

// hold lets the producer run up to holdLead records past the input record
// that makes target first occurrences, and no further until the next hold,
// nor past r.open. It returns target, lowered to the first occurrences the
// input up to r.open holds: what the output can reach.
func (r *nemesisRun) hold(target int64) int64 {
	target = min(target, int64(r.w.firstsBefore[r.open]))
	at := sort.SearchInts(r.w.firstsBefore, int(target))
	if limit := min(int64(at+holdLead), r.open); limit > r.pr.limit.Load() {
		r.pr.limit.Store(limit)
	}
	return target
}

// released is how much of the input may be produced before injection i
// strikes: all of it but the reserve of injections i and later.
func (r *nemesisRun) released(i int) int64 {
	return int64(len(r.w.recs) - max(r.nc.points-i, 0)*reserve)
}

func (r *nemesisRun) start(m *member) {
	m.p = startProc(r.t, r.names.next(m.name), m.env)
}

// guard is the poll guard of every wait: a failed producer ends the run; a
// member that exits without being told to is reported and restarted, as a
// supervisor would, so that the check still covers the rest of the run.
func (r *nemesisRun) guard() error {
	if err := r.pr.check(); err != nil {
		return err
	}
	for _, m := range r.members {
		if !m.p.exited() || m.p.stopped {
			continue
		}
		r.exits++
		r.t.Errorf("%s exited on its own (%s); restarting it", m.p.name, m.p.status())
		if r.exits > 5 {
			return errors.New("members keep exiting")
		}
		r.start(m)
		return fmt.Errorf("%w: restarted %s", errNotYet, m.name)
	}
	return nil
}

func (r *nemesisRun) procs() []*proc {
	ps := make([]*proc, 0, len(r.members))
	for _, m := range r.members {
		ps = append(ps, m.p)
	}
	return ps
}

// settle waits until every member is ready, the broker's group is stable
// with exactly these members, and together they own every input partition:
// no injection lands in the middle of a rebalance.
func (r *nemesisRun) settle() {
	r.t.Helper()
	r.waitGroup(len(r.members), -1, r.procs()...)
}

// waitGroup waits until the group is stable with n members past generation
// after, and the given processes are ready and own every input partition.
func (r *nemesisRun) waitGroup(n int, after int32, ps ...*proc) {
	r.t.Helper()
	groupStable := func() error {
		if err := r.guard(); err != nil {
			return err
		}
		g := r.group()
		switch {
		case g == nil:
			return fmt.Errorf("%w: no group yet", errNotYet)
		case g.State != "Stable" || len(g.Members) != n || g.Epoch <= after || g.NumAssigned() != numPartitions:
			return fmt.Errorf("%w: group %s, generation %d, %d members, %d partitions assigned", errNotYet, g.State, g.Epoch, len(g.Members), g.NumAssigned())
		}
		return nil
	}
	waitFor(r.t, 60*time.Second, fmt.Sprintf("the group to be stable with %d members", n), groupStable)
	waitSettled(r.t, 60*time.Second, groupStable, ps...)
}

func (r *nemesisRun) group() *kfake.GroupInfo {
	c := r.b.cluster()
	if c == nil {
		return nil
	}
	return c.GroupInfo(r.members[0].env["GROUP_ID"])
}

// injectKill SIGKILLs one member (in turn) in the middle of a burst of input
// and starts it again at once.
func injectKill(r *nemesisRun, i int) string {
	m := r.members[i%len(r.members)]
	burst := r.burst()
	up := time.Since(m.p.started)
	name := m.p.name
	m.p.kill(r.t)
	r.start(m)
	return fmt.Sprintf("SIGKILL %s %s, after %s up, restarted", name, burst, up.Round(time.Millisecond))
}

// injectPause SIGSTOPs one member (in turn) in the middle of a burst of
// input, so that it holds records it fetched and has not written yet; keeps
// it stopped until the broker has expired its session and the other member
// owns every partition and has forwarded more; then SIGCONTs it.
func injectPause(r *nemesisRun, i int) string {
	t := r.t
	m := r.members[i%len(r.members)]
	var others []*proc
	for _, o := range r.members {
		if o != m {
			others = append(others, o.p)
		}
	}
	burst := r.burst()
	gen := r.group().Epoch
	from := r.obs.progress()
	if err := m.p.Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP %s: %v", m.p.name, err)
	}
	stopped := time.Now()
	r.waitGroup(len(r.members)-1, gen, others...)
	expired := time.Since(stopped)
	if target := r.hold(from + pauseProgress); target > from {
		r.obs.waitProgress(t, 60*time.Second, target, "the new owner to forward while the member is paused", r.guard)
	}
	after := r.obs.progress()
	if err := m.p.Cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatalf("SIGCONT %s: %v", m.p.name, err)
	}
	return fmt.Sprintf("SIGSTOP %s %s, for %s (session timeout %s, expired after %s, generation %d -> %d), %d keys forwarded by the others meanwhile, SIGCONT",
		m.p.name, burst, time.Since(stopped).Round(time.Millisecond), sessionTimeout, expired.Round(time.Millisecond), gen, r.group().Epoch, after-from)
}

// burstSize is how many records a burst releases at once, beyond the pace.
const burstSize = 1500

// afterLastInput is what a burst says when no first occurrence is left to
// release.
const afterLastInput = "after the last input"

// burst stops the input until the stage has forwarded all of it, then
// releases burstSize records at once (and no more until the next hold) and
// returns once the stage is forwarding them: a member stopped now has a
// fetch in hand.
func (r *nemesisRun) burst() string {
	t := r.t
	produced := r.pr.produced.Load()
	r.pr.limit.Store(produced)
	drained := int64(r.w.firstsBefore[produced])
	r.obs.waitProgress(t, 60*time.Second, drained, "the stage to forward all input before a burst", r.guard)
	end := min(produced+burstSize, r.open)
	if int64(r.w.firstsBefore[end]) <= drained {
		return afterLastInput
	}
	r.pr.burst.Store(end)
	r.pr.limit.Store(end)
	target := drained + min(50, int64(r.w.firstsBefore[end])-drained)
	r.obs.waitProgress(t, 60*time.Second, target, "the stage to forward the start of a burst", r.guard)
	return fmt.Sprintf("while forwarding a burst of %d records (%d of its first occurrences out)", end-produced, r.obs.progress()-drained)
}

// injectLostAck loses the acknowledgement of the next produce request to the
// output topic, after the broker appended it, at the start of a burst of
// input.
func injectLostAck(r *nemesisRun, _ int) string {
	before, recs := r.loser.lost.Load(), r.loser.records.Load()
	r.loser.arm(1)
	// The input up to the hold may be forwarded already: a burst makes
	// sure there are produce requests to intercept.
	burst := r.burst()
	if burst == afterLastInput {
		r.t.Fatalf("no input left to forward, so no produce to lose the acknowledgement of (the reserve for each point is %d records)", reserve)
	}
	waitFor(r.t, 60*time.Second, "a produce to the output to lose its acknowledgement", func() error {
		if err := r.guard(); err != nil {
			return err
		}
		if r.loser.lost.Load() == before {
			return fmt.Errorf("%w: no output produce intercepted yet (%d not confirmed)", errNotYet, r.loser.failed.Load())
		}
		return nil
	})
	return fmt.Sprintf("acknowledgement of a produce of %d records lost after the append, connection closed, %s", r.loser.records.Load()-recs, burst)
}

// injectBrokerRestart closes the broker in the middle of a burst of input and
// reopens it from its data directory on the same port.
func injectBrokerRestart(r *nemesisRun, _ int) string {
	burst := r.burst()
	start := time.Now()
	r.b.close()
	r.b.open(r.t)
	return fmt.Sprintf("broker closed %s and reopened from its data directory, down for %s", burst, time.Since(start).Round(time.Millisecond))
}

// injectFetchFaults arms empty and slow fetches, SIGKILLs a member and starts
// it again, so that its restore (the replay scan of the output, the Kafka
// store's reads) and its first fetches of input meet them; the fault is
// disarmed once the member is ready, the stage's fetches were answered empty
// and slow, and the output moved on.
func injectFetchFaults(r *nemesisRun, i int) string {
	t := r.t
	f := r.fetch
	e0, s0 := f.empties.Load(), f.slows.Load()
	from := r.obs.progress()
	f.armed.Store(true)
	m := r.members[i%len(r.members)]
	name := m.p.name
	m.p.kill(t)
	r.start(m)
	waitReady(t, m.p, 90*time.Second)
	target := r.hold(from + pauseProgress)
	waitFor(t, 90*time.Second, "the stage's fetches to be answered empty and slow while the output moves on", func() error {
		if err := r.guard(); err != nil {
			return err
		}
		if e, s, p := f.empties.Load()-e0, f.slows.Load()-s0, r.obs.progress(); e == 0 || s == 0 || p < target {
			return fmt.Errorf("%w: %d empty, %d slow fetches, %d of %d keys", errNotYet, e, s, p, target)
		}
		return nil
	})
	f.armed.Store(false)
	return fmt.Sprintf("fetches faulted, SIGKILL %s and restart under them: %d answered empty, %d held %s",
		name, f.empties.Load()-e0, f.slows.Load()-s0, slowDelay)
}

// injectRollingRestart stops every member with SIGTERM in turn, the first in
// the middle of a burst of input, each started again and the group settled
// before the next, as a rolling update does.
func injectRollingRestart(r *nemesisRun, _ int) string {
	names := []string{r.burst() + ":"}
	for _, m := range r.members {
		names = append(names, m.p.name)
		m.p.termOK(r.t)
		r.start(m)
		r.settle()
	}
	return "rolling restart " + strings.Join(names, " ")
}
