package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"dedup/checkpoint"
	"dedup/internal/config"
	"dedup/internal/testkit"
)

// runCheckBinary runs `dedup check args...` as a process with exactly env
// and returns its stdout, stderr and exit code.
func runCheckBinary(t *testing.T, env testkit.Env, args ...string) (string, string, int) {
	t.Helper()
	b := startBinary(t, env, append([]string{"check"}, args...)...)
	code := b.waitExit(t, 90*time.Second)
	return b.stdout.String(), b.stderr.String(), code
}

// checkLine returns the line of check name, or "".
func checkLine(out, name string) string {
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) < 2 || (f[0] != "ok" && f[0] != "warn" && f[0] != "FAIL") {
			continue
		}
		if strings.HasPrefix(strings.TrimSpace(strings.TrimPrefix(l, f[0])), name+" ") {
			return l
		}
	}
	return ""
}

// wantCheck fails the test unless check name printed status.
func wantCheck(t *testing.T, out, status, name string) {
	t.Helper()
	l := checkLine(out, name)
	if !strings.HasPrefix(l, status+" ") {
		t.Errorf("check %q: line %q, want status %s; output:\n%s", name, l, status, out)
	}
}

// lastLine is the verdict.
func lastLine(out string) string {
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	return lines[len(lines)-1]
}

// saveSnapshot writes one snapshot of input partition 0 to the checkpoint
// topic as the stage would, and returns its meta.
func saveSnapshot(t *testing.T, brokers []string, topic, group string, tr *kafka.Transport) checkpoint.Meta {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	o := checkpoint.KafkaOptions{Brokers: brokers, Topic: topic, Group: group, Partitions: 2, Transport: tr}
	s, err := checkpoint.NewKafkaStore(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	m, err := s.Save(ctx, checkpoint.Meta{Topic: "events", Partition: 0, Offset: 7, OutputTopic: "events-deduped"},
		bytes.NewReader([]byte("state of partition 0")))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// loadSnapshot restores input partition 0 as a starting stage would.
func loadSnapshot(t *testing.T, brokers []string, topic, group string, tr *kafka.Transport) (checkpoint.Meta, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	o := checkpoint.KafkaOptions{Brokers: brokers, Topic: topic, Group: group, Transport: tr}
	s, err := checkpoint.NewKafkaStore(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var state []byte
	m, _, err := s.Load(ctx, "events", 0, func(_ checkpoint.Meta, r io.Reader) error {
		state, err = io.ReadAll(r)
		return err
	})
	if err != nil {
		t.Fatalf("restore after dedup check: %v", err)
	}
	return m, string(state)
}

// TestCheckGoodSetup: against a cluster with every topic in place (SASL
// on), check exits 0, prints every variable with the password masked and
// the sizing, probes the checkpoint topic, and a restore afterwards gets
// the snapshot saved before the check.
func TestCheckGoodSetup(t *testing.T) {
	const user, pass = "dedup-user", "pw-Never-Printed"
	cluster := testkit.Cluster(t, 2, kfake.EnableSASL(), kfake.Superuser("PLAIN", user, pass))
	if err := cluster.CreateTopic("dedup-dedup-state", 2, checkpointTopicSettings()); err != nil {
		t.Fatal(err)
	}
	addr := cluster.ListenAddrs()[0]
	env := testEnv(t)
	env["KAFKA_BROKERS"] = addr
	env["KAFKA_SASL_MECHANISM"] = "PLAIN"
	env["KAFKA_SASL_USERNAME"] = user
	env["KAFKA_SASL_PASSWORD"] = pass

	cfg, err := config.Load(env.Lookup)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := config.NewConnection(&cfg, []string{addr})
	if err != nil {
		t.Fatal(err)
	}
	tr := &kafka.Transport{SASL: conn.Transport.SASL}
	t.Cleanup(tr.CloseIdleConnections) // the stores do not close a transport they are given
	saved := saveSnapshot(t, []string{addr}, "dedup-dedup-state", "dedup", tr)

	stdout, stderr, code := runCheckBinary(t, env)
	if code != exitOK {
		t.Fatalf("exit %d, want 0; stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if strings.Contains(stdout+stderr, pass) {
		t.Errorf("the password is printed:\n%s", stdout)
	}
	if !strings.Contains(stdout, "KAFKA_SASL_PASSWORD=********\n") {
		t.Errorf("no masked KAFKA_SASL_PASSWORD line:\n%s", stdout)
	}
	for _, name := range config.VarNames() {
		if !strings.Contains(stdout, " "+name+"=") {
			t.Errorf("setting %s not printed", name)
		}
	}
	for _, want := range []string{"* KAFKA_BROKERS=" + addr + "\n", "  CHECKPOINT_TOPIC=dedup-dedup-state\n", "  DEDUP_WINDOW=1h0m0s\n"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("settings lack %q", want)
		}
	}
	for _, name := range []string{"configuration", "broker " + addr, "input topic", "output topic", "output max.message.bytes",
		"checkpoint topic", "checkpoint cleanup.policy", "checkpoint compaction", "committed offsets", "checkpoint read", "checkpoint write"} {
		wantCheck(t, stdout, "ok", name)
	}
	if l := checkLine(stdout, "checkpoint read"); !strings.Contains(l, "1 snapshot(s) of 1 partition(s), all intact") {
		t.Errorf("checkpoint read: %q", l)
	}
	if !strings.Contains(stdout, "one instance holding all 2 input partitions: requests memory") {
		t.Errorf("no sizing summary:\n%s", stdout)
	}
	if !strings.HasPrefix(lastLine(stdout), "dedup check: every check holds") {
		t.Errorf("verdict %q", lastLine(stdout))
	}

	got, state := loadSnapshot(t, []string{addr}, "dedup-dedup-state", "dedup", tr)
	if got.Seq != saved.Seq || got.Offset != 7 || state != "state of partition 0" {
		t.Errorf("restore after the check: seq %d offset %d state %q; want seq %d, offset 7, the saved state", got.Seq, got.Offset, state, saved.Seq)
	}
}

// checkpointTopicSettings are the settings the Kafka store creates its
// topic with, as a kfake topic's configuration.
func checkpointTopicSettings() map[string]string {
	m := map[string]string{}
	for _, ts := range checkpoint.TopicSettings {
		m[ts.Name] = ts.Value
	}
	return m
}

// TestCheckCheckpointCompaction: a checkpoint topic created compacted but
// otherwise with the broker's defaults is a warning, not a failure, naming
// each setting with its value and the recommended one, and how to set them.
func TestCheckCheckpointCompaction(t *testing.T) {
	cluster := testkit.Cluster(t, 2)
	if err := cluster.CreateTopic("dedup-dedup-state", 2, map[string]string{"cleanup.policy": "compact"}); err != nil {
		t.Fatal(err)
	}
	env := clusterEnv(t, cluster, nil)
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"check"}, env.Lookup, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d, want 0:\n%s%s", code, &stdout, &stderr)
	}
	out := stdout.String()
	wantCheck(t, out, "ok", "checkpoint cleanup.policy")
	wantCheck(t, out, "warn", "checkpoint compaction")
	l := checkLine(out, "checkpoint compaction")
	for _, want := range []string{
		"delete.retention.ms=86400000, recommended 3600000",
		"segment.ms=604800000, recommended 3600000",
		// kfake reports no default of its own for it; Kafka's is 0.
		"min.compaction.lag.ms not reported by the broker, recommended 600000",
		"kafka-configs.sh --alter --entity-type topics --entity-name dedup-dedup-state --add-config delete.retention.ms=3600000,min.compaction.lag.ms=600000,segment.ms=3600000",
	} {
		if !strings.Contains(l, want) {
			t.Errorf("checkpoint compaction line lacks %q:\n%s", want, l)
		}
	}
	if !strings.HasPrefix(lastLine(out), "dedup check: every check holds") {
		t.Errorf("verdict %q", lastLine(out))
	}
}

// docCheckExamples returns the fenced blocks of docs/operations.md's
// section on dedup check, each as its lines.
func docCheckExamples(t *testing.T) [][]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "### Before deploying: `dedup check`\n")
	if !ok {
		t.Fatal("docs/operations.md has no section 'Before deploying: `dedup check`'")
	}
	section, _, _ = strings.Cut(section, "\n### ")
	return fencedBlocks(section)
}

// checkShape is what an output's check lines say, addresses aside: each
// line's status and name, and the verdict's opening.
func checkShape(lines []string) []string {
	var shape []string
	for _, l := range lines {
		f := strings.Fields(l)
		switch {
		case len(f) >= 2 && (f[0] == "ok" || f[0] == "warn" || f[0] == "FAIL") && len(l) > 33:
			name := strings.TrimSpace(l[6:33])
			if strings.HasPrefix(name, "broker ") {
				name = "broker"
			}
			shape = append(shape, f[0]+" "+name)
		case strings.HasPrefix(l, "dedup check: "):
			verdict, _, _ := strings.Cut(l, "(")
			shape = append(shape, verdict)
		}
	}
	return shape
}

// TestCheckRunningEmbeddedStage: with KAFKA_BROKERS empty, check finds the
// embedded broker of a running stage, checks its topics and the file store,
// and exits 0, with the checks the example in docs/operations.md shows.
func TestCheckRunningEmbeddedStage(t *testing.T) {
	env := embeddedEnv(t, nil)
	stage := startBinary(t, env)
	waitReady(t, stage, env["METRICS_ADDR"])

	stdout, stderr, code := runCheckBinary(t, env)
	if code != exitOK {
		t.Fatalf("exit %d, want 0; stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	wantCheck(t, stdout, "ok", "embedded broker")
	if l := checkLine(stdout, "broker "+env["EMBEDDED_BROKER_ADDR"]); !strings.Contains(l, "running stage's embedded broker answered") {
		t.Errorf("broker line %q", l)
	}
	for _, name := range []string{"input topic", "output topic", "checkpoint read", "checkpoint write"} {
		wantCheck(t, stdout, "ok", name)
	}
	if l := checkLine(stdout, "checkpoint write"); !strings.Contains(l, filepath.Join(env["DATA_DIR"], "checkpoints", "dedup")) {
		t.Errorf("checkpoint write does not name the file store's directory: %q", l)
	}
	examples := docCheckExamples(t)
	if len(examples) < 1 || len(examples[0]) == 0 || examples[0][0] != "$ go run ./cmd/dedup check" {
		t.Fatalf("the section's first example is not '$ go run ./cmd/dedup check' and its output: %q", examples)
	}
	if got, doc := checkShape(strings.Split(stdout, "\n")), checkShape(examples[0][1:]); !slices.Equal(got, doc) {
		t.Errorf("checks %q, docs/operations.md shows %q", got, doc)
	}
	for _, l := range examples[0][1:] {
		name, _, isSetting := strings.Cut(strings.TrimSpace(l), "=")
		if isSetting && strings.HasPrefix(l, "   ") && !regexp.MustCompile(`(?m)^ [ *] `+name+`=`).MatchString(stdout) {
			t.Errorf("the example's setting line %q is not printed so", l)
		}
	}
	stage.stopOK(t, "stage")
}

// TestCheckUnreachableBroker: a broker that refuses connections and one
// that never answers are each named, and check exits 1.
func TestCheckUnreachableBroker(t *testing.T) {
	refusing, silent := testkit.FreeAddr(t), silentBroker(t)
	env := testEnv(t)
	env["KAFKA_BROKERS"] = refusing + "," + silent
	stdout, _, code := runCheckBinary(t, env, "--timeout", "2s")
	if code != exitFailure {
		t.Fatalf("exit %d, want 1:\n%s", code, stdout)
	}
	if ex := docCheckExamples(t); len(ex) < 2 || !slices.Contains(ex[1], "      (no broker answered: topics, committed offsets and a kafka checkpoint store not checked)") {
		t.Errorf("docs/operations.md's second example lacks the note on what was not checked")
	} else if note := ex[1][len(ex[1])-3]; !strings.Contains(stdout, note+"\n") {
		t.Errorf("output lacks the note %q", note)
	}
	for _, b := range []string{refusing, silent} {
		wantCheck(t, stdout, "FAIL", "broker "+b)
		if !strings.Contains(lastLine(stdout), "broker "+b) {
			t.Errorf("verdict %q does not name broker %s", lastLine(stdout), b)
		}
	}
}

// TestCheckOneBrokerDown: a dead entry of KAFKA_BROKERS while another
// answers is a warning naming it: the clients bootstrap from the others.
func TestCheckOneBrokerDown(t *testing.T) {
	cluster := testkit.Cluster(t, 2)
	if err := cluster.CreateTopic("dedup-dedup-state", 2, map[string]string{"cleanup.policy": "compact"}); err != nil {
		t.Fatal(err)
	}
	dead := testkit.FreeAddr(t)
	env := testEnv(t)
	env["KAFKA_BROKERS"] = dead + "," + cluster.ListenAddrs()[0]
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"check"}, env.Lookup, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d, want 0:\n%s%s", code, &stdout, &stderr)
	}
	wantCheck(t, stdout.String(), "warn", "broker "+dead)
	wantCheck(t, stdout.String(), "ok", "broker "+cluster.ListenAddrs()[0])
	wantCheck(t, stdout.String(), "ok", "checkpoint write")
}

// TestCheckListsEveryFailure: a missing output topic and a checkpoint
// topic that is not compacted are both reported, in one run, and named
// together on the last line; the other checks still run.
func TestCheckListsEveryFailure(t *testing.T) {
	cluster := testkit.NewCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(2, "events"))
	if err := cluster.CreateTopic("dedup-dedup-state", 2, map[string]string{"cleanup.policy": "delete"}); err != nil {
		t.Fatal(err)
	}
	env := testEnv(t)
	env["KAFKA_BROKERS"] = cluster.ListenAddrs()[0]
	stdout, _, code := runCheckBinary(t, env)
	if code != exitFailure {
		t.Fatalf("exit %d, want 1:\n%s", code, stdout)
	}
	wantCheck(t, stdout, "FAIL", "output topic")
	wantCheck(t, stdout, "FAIL", "checkpoint cleanup.policy")
	for _, name := range []string{"input topic", "checkpoint topic", "checkpoint write"} {
		wantCheck(t, stdout, "ok", name)
	}
	if want := "dedup check: 2 check(s) failed: output topic; checkpoint cleanup.policy"; lastLine(stdout) != want {
		t.Errorf("verdict %q, want %q", lastLine(stdout), want)
	}
}

// TestCheckConfigError: a bad configuration exits 2 naming every bad
// variable, as the stage does, and checks nothing.
func TestCheckConfigError(t *testing.T) {
	env := testEnv(t)
	env["DEDUP_WINDOW"] = "soon"
	env["OUTPUT_TOPIC"] = "events"
	stdout, stderr, code := runCheckBinary(t, env)
	if code != exitConfig {
		t.Fatalf("exit %d, want 2:\n%s%s", code, stdout, stderr)
	}
	var want bytes.Buffer
	_, err := config.Load(env.Lookup)
	reportConfigError(&want, err)
	if stderr != want.String() || stdout != "" {
		t.Errorf("stderr %q, stdout %q; want the stage's report %q", stderr, stdout, want.String())
	}
	for _, v := range []string{"DEDUP_WINDOW", "OUTPUT_TOPIC"} {
		if !strings.Contains(stderr, v+": ") {
			t.Errorf("stderr does not name %s", v)
		}
	}
}

// TestCheckFileStoreUnwritable: a checkpoint directory that cannot be
// created fails the write check (exit 1). Its parent is a file, which
// stops root as well as any other user.
func TestCheckFileStoreUnwritable(t *testing.T) {
	env := embeddedEnv(t, nil)
	file := filepath.Join(t.TempDir(), "not-a-dir")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	env["CHECKPOINT_DIR"] = filepath.Join(file, "checkpoints")
	stdout, stderr, code := runCheckBinary(t, env)
	if code != exitFailure {
		t.Fatalf("exit %d, want 1:\n%s%s", code, stdout, stderr)
	}
	wantCheck(t, stdout, "FAIL", "checkpoint read")
	wantCheck(t, stdout, "FAIL", "checkpoint write")
	if want := "dedup check: 2 check(s) failed: checkpoint read; checkpoint write"; lastLine(stdout) != want {
		t.Errorf("verdict %q, want %q", lastLine(stdout), want)
	}

	// A writable directory passes and is left as it was found.
	env["CHECKPOINT_DIR"] = filepath.Join(t.TempDir(), "a", "b")
	if stdout, _, code := runCheckBinary(t, env); code != exitOK {
		t.Fatalf("writable directory: exit %d:\n%s", code, stdout)
	}
	if _, err := os.Stat(filepath.Join(env["CHECKPOINT_DIR"])); !os.IsNotExist(err) {
		t.Errorf("check left %s behind (%v)", env["CHECKPOINT_DIR"], err)
	}
}

// TestCheckCommittedBelowLogStart: committed offsets of the group below
// the input's log start are a warning naming the partition and what will
// be skipped.
func TestCheckCommittedBelowLogStart(t *testing.T) {
	cluster := testkit.Cluster(t, 2)
	addr := cluster.ListenAddrs()[0]
	client := []kgo.Opt{kgo.SeedBrokers(addr)}
	recs := make([]*kgo.Record, 10)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: "events", Partition: 0, Key: []byte{byte(i)}}
	}
	testkit.Produce(t, append(client, kgo.RecordPartitioner(kgo.ManualPartitioner())), recs...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kc := testkit.KafkaClient(t, addr)
	if _, err := kc.OffsetCommit(ctx, &kafka.OffsetCommitRequest{GroupID: "dedup", GenerationID: -1,
		Topics: map[string][]kafka.OffsetCommit{"events": {{Partition: 0, Offset: 2}}}}); err != nil {
		t.Fatal(err)
	}
	if err := cluster.DeleteRecords("events", 0, 5); err != nil {
		t.Fatal(err)
	}
	env := testEnv(t)
	env["KAFKA_BROKERS"] = addr
	var stdout, stderr bytes.Buffer
	if code := run(ctx, []string{"check"}, env.Lookup, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d, want 0 (a warning):\n%s%s", code, &stdout, &stderr)
	}
	l := checkLine(stdout.String(), "committed offsets")
	if !strings.HasPrefix(l, "warn ") || !strings.Contains(l, "3 record(s) of events will be skipped") ||
		!strings.Contains(l, "partition 0 (committed 2, log start 5)") {
		t.Errorf("committed offsets: %q", l)
	}
}

// TestCheckHelp: `dedup check -h` prints check's own usage and exits 0.
func TestCheckHelp(t *testing.T) {
	for _, arg := range []string{"-h", "--help"} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), []string{"check", arg}, testkit.Env{}.Lookup, &stdout, &stderr); code != exitOK {
			t.Fatalf("check %s: exit %d, want 0", arg, code)
		}
		out := stdout.String()
		for _, want := range []string{"Usage: dedup check", "-timeout", "With REPARTITION_TOPIC: that topic exists", "2 configuration error"} {
			if !strings.Contains(out, want) {
				t.Errorf("check %s: usage lacks %q:\n%s", arg, want, out)
			}
		}
	}
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"check", "extra"}, testkit.Env{}.Lookup, &stdout, &stderr); code != exitConfig {
		t.Errorf("check extra: exit %d, want 2", code)
	}
}

// TestCheckTopicSettings: the brokers the cluster advertises beyond
// KAFKA_BROKERS are reached too; an output topic with another partition
// count than the input or a max.message.bytes below PRODUCE_BATCH_BYTES,
// and a missing checkpoint topic (the stage creates it) are warnings; a
// missing dead-letter topic fails.
func TestCheckTopicSettings(t *testing.T) {
	cluster := testkit.NewCluster(t, kfake.NumBrokers(2), kfake.SeedTopics(2, "events"))
	if err := cluster.CreateTopic("events-deduped", 3, map[string]string{"max.message.bytes": "100000", "cleanup.policy": "compact"}); err != nil {
		t.Fatal(err)
	}
	addrs := cluster.ListenAddrs()
	env := testEnv(t)
	env["KAFKA_BROKERS"] = addrs[0]
	env["DEAD_LETTER_TOPIC"] = "events-dead"
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"check"}, env.Lookup, &stdout, &stderr); code != exitFailure {
		t.Fatalf("exit %d, want 1:\n%s%s", code, &stdout, &stderr)
	}
	out := stdout.String()
	if l := checkLine(out, "broker "+addrs[1]); !strings.HasPrefix(l, "ok ") || !strings.Contains(l, "advertised by the cluster") {
		t.Errorf("second broker: %q", l)
	}
	wantCheck(t, out, "warn", "output topic")
	wantCheck(t, out, "warn", "output max.message.bytes")
	wantCheck(t, out, "warn", "output cleanup.policy")
	if l := checkLine(out, "output cleanup.policy"); !strings.Contains(l, "without a key are refused") || !strings.Contains(l, "DEAD_LETTER_TOPIC events-dead") {
		t.Errorf("compacted output: %q", l)
	}
	wantCheck(t, out, "FAIL", "dead-letter topic")
	wantCheck(t, out, "warn", "checkpoint topic")
	wantCheck(t, out, "warn", "checkpoint store")
	if want := "dedup check: 1 check(s) failed: dead-letter topic"; lastLine(out) != want {
		t.Errorf("verdict %q, want %q", lastLine(out), want)
	}
	// Checking created nothing.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	md, err := testkit.KafkaClient(t, addrs[0]).Metadata(ctx, &kafka.MetadataRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tp := range md.Topics {
		if tp.Name == "events-dead" || tp.Name == "dedup-dedup-state" {
			t.Errorf("dedup check created topic %s", tp.Name)
		}
	}
}

// TestSecretsTagged: a variable named like a credential is tagged
// secret:"true", so dedup check never prints it.
func TestSecretsTagged(t *testing.T) {
	secrets := 0
	for _, d := range config.Docs() {
		named := regexp.MustCompile(`PASSWORD|SECRET|TOKEN|CREDENTIAL|PASSPHRASE`).MatchString(d.Name)
		if named && !d.Secret {
			t.Errorf("%s looks like a credential but is not tagged secret:\"true\"", d.Name)
		}
		if d.Secret {
			secrets++
		}
	}
	if secrets == 0 {
		t.Error("no variable is tagged secret")
	}
}
