package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"dedup/internal/testkit"
)

// The Kafka the tests run against: by default a kfake cluster of each
// test's own, in process; with E2E_KAFKA_BROKERS one external cluster that
// every test shares, each under topic and group names of its own.
const (
	// brokersEnv names the external cluster: its bootstrap servers,
	// comma-separated, or embeddedBrokers.
	brokersEnv = "E2E_KAFKA_BROKERS"
	// embeddedBrokers starts the built binary with KAFKA_BROKERS empty, as a
	// process of its own, and runs against its embedded broker: a stand-in
	// for an external cluster where none is at hand (CI).
	embeddedBrokers = "embedded"
)

// external is the external cluster's bootstrap list, "" for kfake; set once
// by TestMain (useExternal).
var external string

// names are the topics and consumer group a test's stages use.
type names struct {
	input, output, repartition, group string
}

// kfakeNames are the names on a kfake cluster of the test's own: the
// constants, also the embedded broker's and the README's topics.
var kfakeNames = names{input: inputTopic, output: outputTopic, repartition: repartitionTopic, group: "e2e"}

// testNames maps a test's name to the names newCluster chose for it.
var testNames sync.Map

// namesOf returns the names of t's cluster, those of the nearest parent
// test that made one, else (on kfake) kfakeNames. Against an external
// cluster a test without a cluster of its own is a bug in the test: the
// constants would collide with every other run.
func namesOf(t testing.TB) names {
	t.Helper()
	for n := t.Name(); ; {
		if v, ok := testNames.Load(n); ok {
			return v.(names)
		}
		i := strings.LastIndexByte(n, '/')
		if i < 0 {
			break
		}
		n = n[:i]
	}
	if external != "" {
		t.Fatalf("%s has no names of its own on the external cluster: create it with newCluster", t.Name())
	}
	return kfakeNames
}

// needsKfake skips t against an external cluster: what it needs is a
// feature of kfake's (fault injection, restarts, the group's state).
func needsKfake(t testing.TB, what string) {
	t.Helper()
	if external != "" {
		t.Skipf("needs kfake's %s; %s names an external cluster", what, brokersEnv)
	}
}

// newCluster returns the cluster t runs against and its bootstrap list.
// On kfake: a fresh cluster with the topics inputTopic and outputTopic
// (numPartitions each) plus extra options. Against an external cluster:
// nil, with an input and an output topic created under names unique to
// this run of t (namesOf), deleted at cleanup with every topic and group
// whose name starts with them (the checkpoint topic, the repartition topic
// and its group); a test that passes kfake options is skipped there.
func newCluster(t *testing.T, extra ...kfake.Opt) (*kfake.Cluster, string) {
	t.Helper()
	if external == "" {
		c := testkit.Cluster(t, numPartitions, extra...)
		useNames(t, kfakeNames)
		t.Cleanup(func() {
			// A failed wait often means a partition nobody consumes: say
			// who held what (a member killed mid-join stays in kfake's
			// group; see waitSettled).
			if !t.Failed() {
				return
			}
			if g := c.GroupInfo(kfakeNames.group); g != nil {
				t.Logf("group %s: state %s, generation %d, %d members", g.Group, g.State, g.Epoch, len(g.Members))
				for _, m := range g.Members {
					t.Logf("  member %s (%s): %v", m.MemberID, m.ClientHost, m.Assignment)
				}
			}
		})
		return c, c.ListenAddrs()[0]
	}
	if len(extra) > 0 {
		needsKfake(t, "cluster options")
	}
	n := uniqueNames(t.Name())
	useNames(t, n)
	// Registered before any process or client of the test starts, so it
	// runs after their cleanups stopped them.
	t.Cleanup(func() { removeNames(t, n) })
	createTopics(t, external, n.input, n.output)
	return nil, external
}

// useNames makes n the names of t and its subtests until t ends.
func useNames(t *testing.T, n names) {
	testNames.Store(t.Name(), n)
	t.Cleanup(func() { testNames.Delete(t.Name()) })
}

// uniqueNames are names for one run of test: a prefix of the test's name
// and a random part, so that runs on one cluster never share a topic or a
// group, and the cleanup finds all of them by the prefix (a group's
// checkpoint topic and repartition group start with the group's name).
func uniqueNames(test string) names {
	slug := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			return r
		case r >= 'A' && r <= 'Z':
			return r + 'a' - 'A'
		}
		return '-'
	}, test)
	if len(slug) > 40 {
		slug = slug[:40]
	}
	// Not the test's seeded source: a replayed seed must not reuse names.
	prefix := fmt.Sprintf("e2e-%s-%08x", strings.Trim(slug, "-"), rand.Uint32())
	return names{
		input:       prefix + "-events",
		output:      prefix + "-events-deduped",
		repartition: prefix + "-events-by-id",
		group:       prefix,
	}
}

// owns reports whether name is one of the names of the run whose group
// (the common prefix) is prefix.
func owns(prefix, name string) bool {
	return name == prefix || strings.HasPrefix(name, prefix+"-")
}

// seedBrokers is the client option for a bootstrap list.
func seedBrokers(brokers string) kgo.Opt {
	return kgo.SeedBrokers(strings.Split(brokers, ",")...)
}

// adminClient is a plain client of the external cluster for the calls
// below; the caller closes it.
func adminClient(t testing.TB) *kgo.Client {
	t.Helper()
	return clientOf(t, external)
}

// clientOf is a plain client of brokers; the caller closes it.
func clientOf(t testing.TB, brokers string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(seedBrokers(brokers))
	if err != nil {
		t.Fatalf("client of %s: %v", brokers, err)
	}
	return cl
}

// createTopics creates topics on brokers with numPartitions partitions
// each (the cluster's replication factor) and waits until every partition
// has a leader: a stage started at once must not find a topic missing.
func createTopics(t *testing.T, brokers string, topics ...string) {
	t.Helper()
	cl := clientOf(t, brokers)
	defer cl.Close()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 30_000
	for _, topic := range topics {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, numPartitions, -1
		req.Topics = append(req.Topics, rt)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("create topics %v: %v", topics, err)
	}
	for _, rt := range resp.Topics {
		if err := kerr.ErrorForCode(rt.ErrorCode); err != nil {
			t.Fatalf("create topic %s: %v", rt.Topic, err)
		}
	}
	waitFor(t, 30*time.Second, fmt.Sprintf("topics %v to have a leader for every partition", topics), func() error {
		req := kmsg.NewPtrMetadataRequest()
		for _, topic := range topics {
			mt := kmsg.NewMetadataRequestTopic()
			mt.Topic = kmsg.StringPtr(topic)
			req.Topics = append(req.Topics, mt)
		}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return fmt.Errorf("%w: %v", errNotYet, err)
		}
		for _, mt := range resp.Topics {
			if err := kerr.ErrorForCode(mt.ErrorCode); err != nil || len(mt.Partitions) != numPartitions {
				return fmt.Errorf("%w: %s: %d partitions, %v", errNotYet, *mt.Topic, len(mt.Partitions), err)
			}
			for _, p := range mt.Partitions {
				if p.Leader < 0 || p.ErrorCode != 0 {
					return fmt.Errorf("%w: %s/%d has no leader", errNotYet, *mt.Topic, p.Partition)
				}
			}
		}
		return nil
	})
}

// removeNames deletes every topic and group of the run whose names are n
// from the external cluster, and fails t naming what it could not delete.
// A group is deleted once empty: a member killed by the test leaves it when
// its session times out.
func removeNames(t *testing.T, n names) {
	t.Helper()
	cl := adminClient(t)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	topics, _, err := owned(ctx, cl, n.group)
	if err != nil {
		t.Errorf("list what to delete: %v", err)
		return
	}
	if len(topics) > 0 {
		del := kmsg.NewPtrDeleteTopicsRequest()
		del.TimeoutMillis = 30_000
		for _, topic := range topics {
			rt := kmsg.NewDeleteTopicsRequestTopic()
			rt.Topic = kmsg.StringPtr(topic)
			del.Topics = append(del.Topics, rt)
			del.TopicNames = append(del.TopicNames, topic)
		}
		resp, err := del.RequestWith(ctx, cl)
		if err != nil {
			t.Errorf("delete topics %v: %v", topics, err)
		} else {
			for _, rt := range resp.Topics {
				if err := kerr.ErrorForCode(rt.ErrorCode); err != nil && !errors.Is(err, kerr.UnknownTopicOrPartition) {
					t.Errorf("delete topic %s: %v", *rt.Topic, err)
				}
			}
		}
	}

	var left []string
	for {
		_, groups, err := owned(ctx, cl, n.group)
		if err != nil {
			t.Errorf("list groups to delete: %v", err)
			return
		}
		if len(groups) == 0 {
			return
		}
		req := kmsg.NewPtrDeleteGroupsRequest()
		req.Groups = groups
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Errorf("delete groups %v: %v", groups, err)
			return
		}
		left = left[:0]
		for _, g := range resp.Groups {
			if err := kerr.ErrorForCode(g.ErrorCode); err != nil && !errors.Is(err, kerr.GroupIDNotFound) {
				left = append(left, fmt.Sprintf("%s (%v)", g.Group, err))
			}
		}
		if len(left) == 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Errorf("groups left on %s: %s", external, strings.Join(left, ", "))
			return
		case <-time.After(200 * time.Millisecond): // poll period: a killed member's session runs out meanwhile
		}
	}
}

// owned lists the topics and groups on the cluster of cl whose names start
// with prefix (owns).
func owned(ctx context.Context, cl *kgo.Client, prefix string) (topics, groups []string, err error) {
	meta, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		return nil, nil, fmt.Errorf("list topics: %w", err)
	}
	for _, mt := range meta.Topics {
		if mt.Topic != nil && owns(prefix, *mt.Topic) {
			topics = append(topics, *mt.Topic)
		}
	}
	// kgo asks every broker and merges the answers.
	lg, err := kmsg.NewPtrListGroupsRequest().RequestWith(ctx, cl)
	if err != nil {
		return nil, nil, fmt.Errorf("list groups: %w", err)
	}
	if err := kerr.ErrorForCode(lg.ErrorCode); err != nil {
		return nil, nil, fmt.Errorf("list groups: %w", err)
	}
	for _, g := range lg.Groups {
		if owns(prefix, g.Group) {
			groups = append(groups, g.Group)
		}
	}
	slices.Sort(topics)
	slices.Sort(groups)
	return topics, groups, nil
}

// TestExternalLeavesNothing: a test's run on an external cluster, with a
// stage that creates its own topics and groups (the Kafka checkpoint
// store's topic, the repartition topic, both hops' groups) and is killed,
// leaves no topic and no group behind once it ends.
func TestExternalLeavesNothing(t *testing.T) {
	if external == "" {
		t.Skipf("runs against an external cluster (%s): a kfake cluster ends with its test", brokersEnv)
	}
	var n names
	var want []string
	t.Run("run", func(t *testing.T) {
		_, brokers := newCluster(t)
		n = namesOf(t)
		env := stageEnv(t, brokers, "kafka")
		env["REPARTITION_TOPIC"] = n.repartition
		env["DEDUP_KEY"] = "json:id"
		p := startProc(t, "dedup", env)
		hop1Settled(t, func() error { return alive(p) }, p)
		want = []string{n.input, n.output, n.repartition, env["GROUP_ID"] + "-dedup-state", n.group, n.group + "-repartition"}
		slices.Sort(want)
		cl := adminClient(t)
		defer cl.Close()
		waitFor(t, 30*time.Second, fmt.Sprintf("%v on the cluster", want), func() error {
			topics, groups, err := owned(context.Background(), cl, n.group)
			if err != nil {
				return fmt.Errorf("%w: %v", errNotYet, err)
			}
			if have := slices.Sorted(slices.Values(append(topics, groups...))); !slices.Equal(have, want) {
				return fmt.Errorf("%w: %v", errNotYet, have)
			}
			return nil
		})
		// Killed, not stopped: its groups can only be deleted once its
		// sessions ran out.
		p.kill(t)
	})
	if n.group == "" {
		t.Fatal("the run made no cluster")
	}
	cl := adminClient(t)
	defer cl.Close()
	topics, groups, err := owned(context.Background(), cl, n.group)
	if err != nil {
		t.Fatal(err)
	}
	if len(topics)+len(groups) > 0 {
		t.Errorf("left on the cluster after the run of %v: topics %v, groups %v", want, topics, groups)
	}
}

// useExternal reads E2E_KAFKA_BROKERS into external. Empty: kfake, nothing
// to do. embeddedBrokers: it starts bin with KAFKA_BROKERS unset, its
// embedded broker on a free port, and stop ends it. Otherwise the value is
// the bootstrap list. Either way the cluster must answer within 30 s.
func useExternal(bin string) (stop func(), err error) {
	stop = func() {}
	v := strings.TrimSpace(os.Getenv(brokersEnv))
	var gone <-chan struct{} // closed if the embedded broker exits
	switch v {
	case "":
		return stop, nil
	case embeddedBrokers:
		if v, gone, stop, err = startEmbedded(bin); err != nil {
			return func() {}, err
		}
	}
	if err := reachable(v, gone); err != nil {
		stop()
		return func() {}, fmt.Errorf("%s=%s: %w", brokersEnv, os.Getenv(brokersEnv), err)
	}
	external = v
	if gone == nil {
		fmt.Fprintf(os.Stderr, "e2e: %s=%s: tests run against that cluster; those that need kfake are skipped\n", brokersEnv, v)
	}
	return stop, nil
}

// reachable polls the cluster at brokers with metadata requests until one
// is answered, for at most 30 s, giving up early once gone is closed.
func reachable(brokers string, gone <-chan struct{}) error {
	cl, err := kgo.NewClient(seedBrokers(brokers))
	if err != nil {
		return err
	}
	defer cl.Close()
	deadline := time.After(30 * time.Second)
	tick := time.NewTicker(testkit.PollEvery)
	defer tick.Stop()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-gone:
			return fmt.Errorf("the broker process exited: %w", err)
		case <-deadline:
			return fmt.Errorf("no answer to a metadata request within 30s: %w", err)
		case <-tick.C:
		}
	}
}

// startEmbedded runs bin as a broker of its own: KAFKA_BROKERS unset, so it
// starts its embedded broker (and an idle stage on the default topics),
// data in a temporary directory. stop sends SIGTERM, kills it after 15 s,
// prints its log when it did not end in exit 0, and removes the directory.
func startEmbedded(bin string) (addr string, gone <-chan struct{}, stop func(), err error) {
	dir, err := os.MkdirTemp("", "dedup-e2e-broker-")
	if err != nil {
		return "", nil, nil, err
	}
	logPath := filepath.Join(dir, "broker.log")
	logf, err := os.Create(logPath)
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, nil, err
	}
	defer logf.Close()
	addr, metrics, err := freeAddrs()
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, nil, err
	}
	cmd := exec.Command(bin)
	cmd.Env = testkit.EnvList(map[string]string{
		"EMBEDDED_BROKER_ADDR": addr,
		"METRICS_ADDR":         metrics,
		"DATA_DIR":             filepath.Join(dir, "data"),
		"LOG_LEVEL":            "warn",
	})
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return "", nil, nil, fmt.Errorf("start the embedded broker: %w", err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	stop = func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if !cmd.ProcessState.Success() {
			fmt.Fprintf(os.Stderr, "e2e: the embedded broker ended with %s; its log:\n%s\n", cmd.ProcessState, tail(logPath, 8<<10))
		}
		os.RemoveAll(dir)
	}
	fmt.Fprintf(os.Stderr, "e2e: %s=%s: the built binary's embedded broker on %s (pid %d)\n", brokersEnv, embeddedBrokers, addr, cmd.Process.Pid)
	return addr, done, stop, nil
}

// freeAddrs returns two 127.0.0.1 addresses nothing listens on right now,
// held open together so that they differ (testkit.FreeAddr needs a test).
func freeAddrs() (string, string, error) {
	var addrs []string
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	for range 2 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", "", err
		}
		lns = append(lns, ln)
		addrs = append(addrs, ln.Addr().String())
	}
	return addrs[0], addrs[1], nil
}

// allowFutureTimestamps lifts the bound on how far ahead of the broker's
// clock a record of topics may be stamped (message.timestamp.after.max.ms,
// Kafka 3.6 and later) on an external cluster. A broker that does not know
// the setting (kfake, older Kafka) has no such bound.
func allowFutureTimestamps(t testing.TB, brokers string, topics ...string) {
	t.Helper()
	if external == "" {
		return
	}
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	for _, topic := range topics {
		res := kmsg.NewIncrementalAlterConfigsRequestResource()
		res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, topic
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Op, c.Value = "message.timestamp.after.max.ms", kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr(strconv.FormatInt(math.MaxInt64, 10))
		res.Configs = append(res.Configs, c)
		req.Resources = append(req.Resources, res)
	}
	resp := testkit.Request(t, brokers, "allow future timestamps", req).(*kmsg.IncrementalAlterConfigsResponse)
	for _, r := range resp.Resources {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil && !errors.Is(err, kerr.InvalidConfig) {
			t.Fatalf("set message.timestamp.after.max.ms of %s: %v", r.ResourceName, err)
		}
	}
}
