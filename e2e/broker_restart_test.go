package e2e_test

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"dedup/internal/testkit"
)

const (
	brokerRecords  = 20000
	brokerRestarts = 2
)

// restartable is a kfake broker on a fixed port, so it can be closed and
// reopened under the same address; with a data directory among its options
// it reopens with its log intact.
type restartable struct {
	mu     sync.Mutex
	opts   []kfake.Opt
	onOpen []func(*kfake.Cluster) // run on each opening: control functions
	c      *kfake.Cluster
}

// newRestartable prepares a broker on a free port with the shared cluster
// options plus extra, its warnings in a log file whose tail joins the test
// log on failure; open starts it. Cleanup closes it.
func newRestartable(t *testing.T, extra ...kfake.Opt) (b *restartable, brokers string) {
	t.Helper()
	needsKfake(t, "restarts and control functions (a broker closed and reopened on its port)")
	_, portStr, err := net.SplitHostPort(testkit.FreeAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(t.TempDir(), "kfake.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		logf.Close()
		if t.Failed() {
			t.Logf("---- kfake warnings tail:\n%s", tail(logPath, 8<<10))
		}
	})
	opts := append([]kfake.Opt{kfake.Ports(port), kfake.WithLogger(kfake.BasicLogger(logf, kfake.LogLevelWarn))}, extra...)
	b = &restartable{opts: testkit.ClusterOpts(numPartitions, opts...)}
	t.Cleanup(b.close)
	return b, net.JoinHostPort("127.0.0.1", portStr)
}

func (r *restartable) open(t *testing.T) {
	t.Helper()
	c, err := kfake.NewCluster(r.opts...)
	if err != nil {
		t.Fatalf("open kfake: %v", err)
	}
	for _, fn := range r.onOpen {
		fn(c)
	}
	r.mu.Lock()
	r.c = c
	r.mu.Unlock()
}

// cluster is the broker open at the moment, nil while it is closed.
func (r *restartable) cluster() *kfake.Cluster {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.c
}

func (r *restartable) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.c != nil {
		r.c.Close()
		r.c = nil
	}
}

// TestBrokerRestart closes the broker and reopens it from its data directory
// on the same port while the stage runs (the kafka checkpoint store lives on
// that broker too): no loss, no duplicates, and the stage rides it out.
func TestBrokerRestart(t *testing.T) {
	needsKfake(t, "broker restarts: closed and reopened on its port from its data directory (kfake.DataDir)")
	rng := newRand(testSeed(t))
	b, brokers := newRestartable(t, kfake.DataDir(t.TempDir()))
	b.open(t)

	w := newWorkload(rng, brokerRecords, time.Now().Truncate(time.Millisecond))
	obs := startObserver(t, brokers)
	env := stageEnv(t, brokers, "kafka")
	var names procSet
	p := startProc(t, names.next("dedup"), env)
	pr := startProducer(t, brokers, w, obs, 1500)
	// The stage should ride out a broker restart. If it exits instead, that
	// is reported, and it is restarted as a supervisor would, so that the
	// exactly-once check still covers the restart that followed.
	exits := 0
	guard := func() error {
		if err := pr.check(); err != nil {
			return err
		}
		if !p.exited() {
			return nil
		}
		exits++
		t.Errorf("%s exited during the broker restart (%s) instead of riding it out; restarting it", p.name, p.status())
		if exits > 3 {
			return errors.New("the stage keeps exiting")
		}
		p = startProc(t, names.next("dedup"), env)
		return fmt.Errorf("%w: restarted the stage", errNotYet)
	}

	for i, at := range killPoints(rng, w.nFirsts, brokerRestarts) {
		obs.waitProgress(t, 60*time.Second, int64(at), fmt.Sprintf("the output to reach restart point %d (%d keys)", i+1, at), guard)
		start := time.Now()
		b.close()
		b.open(t)
		t.Logf("broker restart %d/%d at %d keys forwarded, %d output records (%d input produced): down for %s",
			i+1, brokerRestarts, at, obs.count(), pr.produced.Load(), time.Since(start).Round(time.Millisecond))
	}

	scenario{rng: rng, brokers: brokers, w: w, obs: obs}.finish(t, pr, guard, 90*time.Second, p)
}
