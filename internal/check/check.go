package check

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"

	"dedup/checkpoint"
	"dedup/internal/config"
	"dedup/internal/service"
	"dedup/offsets"
	"dedup/processor/repartition"
)

// Each check prints one line; all of them run, so one run lists every
// problem.

// checkStatus is a check's verdict: a warning does not fail the run.
type checkStatus int

const (
	checkOK checkStatus = iota
	checkWarn
	checkFail
)

func (s checkStatus) String() string {
	switch s {
	case checkOK:
		return "ok"
	case checkWarn:
		return "warn"
	}
	return "FAIL"
}

// TimeoutDefault bounds each network step of a check (a broker that
// accepts connections and never answers costs this much, not the OS's TCP
// timeout).
const TimeoutDefault = 10 * time.Second

// secretMask stands for the value of a `secret:"true"` variable.
const secretMask = "********"

// checker runs the checks and prints each result as it comes.
type checker struct {
	cfg     *config.Config
	lookup  config.LookupFunc
	log     *slog.Logger
	out     io.Writer
	timeout time.Duration
	failed  []string
	warned  int
	passed  int
}

func (c *checker) report(st checkStatus, name, format string, args ...any) {
	switch st {
	case checkFail:
		c.failed = append(c.failed, name)
	case checkWarn:
		c.warned++
	default:
		c.passed++
	}
	fmt.Fprintf(c.out, "%-4s  %-26s %s\n", st, name, fmt.Sprintf(format, args...))
}

// step bounds one network step by the check timeout.
func (c *checker) step(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.timeout)
}

// Options configure Run.
type Options struct {
	Config  *config.Config    // loaded and validated
	Lookup  config.LookupFunc // the environment, to mark the variables it sets
	Logger  *slog.Logger
	Out     io.Writer     // one line per check, and the settings and sizing
	Timeout time.Duration // bound on each network step
}

// Run runs every check, printing each result as it comes, and reports
// whether every one holds (warnings allowed).
func Run(ctx context.Context, o Options) bool {
	c := &checker{cfg: o.Config, lookup: o.Lookup, log: o.Logger, out: o.Out, timeout: o.Timeout}
	return c.run(ctx)
}

func (c *checker) run(ctx context.Context) bool {
	c.printSettings()
	fmt.Fprintln(c.out, "\nChecks:")
	c.report(checkOK, "configuration", "%d variables, every one valid", len(config.Docs()))

	conn, reached := c.checkBrokers(ctx)
	var counts topicCounts
	if reached {
		defer conn.Transport.CloseIdleConnections()
		counts = c.checkTopics(ctx, conn)
		c.checkGroups(ctx, conn, counts)
	}
	// The filters, the checkpoint topic and the sizing are hop 2's: over
	// the repartition topic's partitions with REPARTITION_TOPIC.
	hop2Partitions, checkpointTopic := counts.hop2, counts.checkpoint
	if !reached && !c.cfg.Embedded() {
		fmt.Fprintln(c.out, "      (no broker answered: topics, committed offsets and a kafka checkpoint store not checked)")
	}
	c.checkRegistry(ctx)
	if !c.cfg.RunsDedup() {
		fmt.Fprintln(c.out, "      (REPARTITION_HOPS=rekey: no output, dead-letter or checkpoint topic, checkpoint store or filters to check)")
		return c.finish()
	}
	c.checkStore(ctx, conn, reached, checkpointTopic, hop2Partitions)

	parts := hop2Partitions
	if parts == 0 && c.cfg.Embedded() {
		parts = c.cfg.EmbeddedPartitions
	}
	if err := c.printSizing(parts); err != nil {
		c.report(checkFail, "sizing", "%v", err)
	}
	return c.finish()
}

// finish prints the verdict: true when no check failed.
func (c *checker) finish() bool {
	fmt.Fprintln(c.out)
	if len(c.failed) > 0 {
		fmt.Fprintf(c.out, "dedup check: %d check(s) failed: %s\n", len(c.failed), strings.Join(c.failed, "; "))
		return false
	}
	fmt.Fprintf(c.out, "dedup check: every check holds (%d ok, %d warning(s))\n", c.passed, c.warned)
	return true
}

// printSettings prints every variable with the value the stage would use,
// defaults and derived defaults applied; secrets masked.
func (c *checker) printSettings() {
	fmt.Fprintln(c.out, "Effective settings (every variable; * = set in the environment):")
	v := reflect.ValueOf(c.cfg).Elem()
	for _, d := range config.Docs() {
		value := formatSetting(v.FieldByName(d.Field))
		if d.Secret && value != "" {
			value = secretMask
		}
		mark := " "
		if _, set := c.lookup(d.Name); set {
			mark = "*"
		}
		fmt.Fprintf(c.out, " %s %s=%s\n", mark, d.Name, value)
	}
}

func formatSetting(f reflect.Value) string {
	if d, ok := f.Interface().(time.Duration); ok {
		return d.String()
	}
	return fmt.Sprint(f.Interface())
}

// checkBrokers asks every bootstrap broker, then every broker the cluster
// advertises (the clients connect to those), for an answer. With
// KAFKA_BROKERS empty it looks for a running stage's embedded broker.
func (c *checker) checkBrokers(ctx context.Context) (*config.Connection, bool) {
	if c.cfg.Embedded() {
		return c.checkEmbedded(ctx)
	}
	conn, err := config.NewConnection(c.cfg, c.cfg.BrokerList())
	if err != nil {
		c.report(checkFail, "connection settings", "%v", err)
		return nil, false
	}
	var md *kafka.MetadataResponse
	errs := make([]error, len(conn.Brokers))
	answered := make([]int, len(conn.Brokers))
	for i, b := range conn.Brokers {
		got, err := c.metadata(ctx, conn, b)
		if errs[i] = err; err == nil {
			answered[i] = len(got.Brokers)
			if md == nil {
				md = got
			}
		}
	}
	// In KAFKA_BROKERS order, once it is known whether any answered.
	for i, b := range conn.Brokers {
		switch err := errs[i]; {
		case err == nil:
			c.report(checkOK, "broker "+b, "answered: cluster of %d broker(s)", answered[i])
		case md != nil && !service.Permanent(err):
			c.report(checkWarn, "broker "+b, "unreachable: %s (the other brokers bootstrap the clients)", brokerError(err))
		default:
			c.report(checkFail, "broker "+b, "unreachable: %s", brokerError(err))
		}
	}
	if md == nil {
		conn.Transport.CloseIdleConnections()
		return nil, false
	}
	bootstrap := map[string]bool{}
	for _, b := range conn.Brokers {
		bootstrap[b] = true
	}
	for _, b := range md.Brokers {
		addr := net.JoinHostPort(b.Host, strconv.Itoa(b.Port))
		if bootstrap[addr] {
			continue
		}
		cctx, cancel := c.step(ctx)
		client := &kafka.Client{Addr: kafka.TCP(addr), Transport: conn.Transport, Timeout: c.timeout}
		_, err := client.ApiVersions(cctx, &kafka.ApiVersionsRequest{})
		cancel()
		if err != nil {
			c.report(checkFail, "broker "+addr, "advertised by the cluster (id %d) but unreachable from here: %v", b.ID, err)
			continue
		}
		c.report(checkOK, "broker "+addr, "advertised by the cluster (id %d), answered", b.ID)
	}
	return conn, true
}

// metadata asks one broker for the cluster's brokers, on a transport of its
// own (as start-up does) so that a silent broker's connection is not reused.
func (c *checker) metadata(ctx context.Context, conn *config.Connection, broker string) (*kafka.MetadataResponse, error) {
	tr := conn.ProbeTransport(min(service.StartupDialTimeout, c.timeout))
	defer tr.CloseIdleConnections()
	cctx, cancel := c.step(ctx)
	defer cancel()
	client := &kafka.Client{Addr: kafka.TCP(broker), Transport: tr, Timeout: c.timeout}
	md, err := client.Metadata(cctx, &kafka.MetadataRequest{})
	if err != nil {
		if cctx.Err() != nil && ctx.Err() == nil {
			return nil, fmt.Errorf("no answer within %v", c.timeout)
		}
		return nil, err
	}
	if len(md.Brokers) == 0 {
		return nil, errors.New("the cluster lists no brokers")
	}
	return md, nil
}

// brokerError says what a refused credential or certificate means.
func brokerError(err error) string {
	if service.Permanent(err) {
		return fmt.Sprintf("%v (check KAFKA_TLS_* / KAFKA_SASL_*)", err)
	}
	return err.Error()
}

// checkEmbedded: with KAFKA_BROKERS empty the stage starts its own broker.
// A running stage's broker is checked like any other; otherwise the address
// must be free for the stage to listen on.
func (c *checker) checkEmbedded(ctx context.Context) (*config.Connection, bool) {
	addr := c.cfg.EmbeddedBrokerAddr
	c.report(checkOK, "embedded broker", "KAFKA_BROKERS is empty: the stage runs its own single-node broker on %s (for trying dedup out, not for production)", addr)
	conn, err := config.NewConnection(c.cfg, []string{addr})
	if err != nil {
		c.report(checkFail, "connection settings", "%v", err)
		return nil, false
	}
	if _, err := c.metadata(ctx, conn, addr); err == nil {
		c.report(checkOK, "broker "+addr, "a running stage's embedded broker answered")
		return conn, true
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		c.report(checkFail, "broker "+addr, "EMBEDDED_BROKER_ADDR is taken by something that does not answer as a Kafka broker: %v", err)
		return nil, false
	}
	ln.Close()
	c.report(checkOK, "broker "+addr, "free: the stage listens there and creates %s and %s with %d partitions (EMBEDDED_PARTITIONS)",
		c.cfg.InputTopic, c.cfg.OutputTopic, c.cfg.EmbeddedPartitions)
	return nil, false
}

// topicState is what the cluster says of one topic.
type topicState struct {
	name       string
	partitions int
	configs    map[string]string // nil when they could not be read
	err        error             // the topic could not be described (service.ErrTopicNotFound: missing)
}

// describeTopics asks for the topics' partitions and configurations. It
// never creates a topic: kafka-go's metadata requests do not ask for
// auto-creation.
func (c *checker) describeTopics(ctx context.Context, conn *config.Connection, names []string) map[string]*topicState {
	out := map[string]*topicState{}
	for _, n := range names {
		out[n] = &topicState{name: n, err: service.ErrTopicNotFound}
	}
	client := &kafka.Client{Addr: kafka.TCP(conn.Brokers...), Transport: conn.Transport, Timeout: c.timeout}
	cctx, cancel := c.step(ctx)
	defer cancel()
	md, err := client.Metadata(cctx, &kafka.MetadataRequest{Topics: names})
	if err != nil {
		for _, t := range out {
			t.err = fmt.Errorf("describe topic: %w", err)
		}
		return out
	}
	req := &kafka.DescribeConfigsRequest{}
	for _, t := range md.Topics {
		st, ok := out[t.Name]
		if !ok {
			continue
		}
		switch {
		case errors.Is(t.Error, kafka.UnknownTopicOrPartition):
		case t.Error != nil:
			st.err = fmt.Errorf("describe topic: %w", t.Error)
		case len(t.Partitions) > 0:
			st.partitions, st.err = len(t.Partitions), nil
			// All configs: some brokers report the broker-level name too.
			req.Resources = append(req.Resources, kafka.DescribeConfigRequestResource{
				ResourceType: kafka.ResourceTypeTopic, ResourceName: t.Name})
		}
	}
	if len(req.Resources) == 0 {
		return out
	}
	res, err := client.DescribeConfigs(cctx, req)
	if err != nil {
		c.log.Debug("describe topic configs", "err", err)
		return out
	}
	for _, r := range res.Resources {
		st, ok := out[r.ResourceName]
		if !ok || r.Error != nil {
			continue
		}
		st.configs = map[string]string{}
		for _, e := range r.ConfigEntries {
			st.configs[e.ConfigName] = e.ConfigValue
		}
	}
	return out
}

// topicCounts is what checkTopics found: partition counts (0 when a topic
// could not be described or does not exist yet) and the checkpoint
// topic's state.
type topicCounts struct {
	input int // INPUT_TOPIC
	// hop2 is what GROUP_ID deduplicates, the partitions of the filters
	// and the checkpoint topic: the input's without REPARTITION_TOPIC; with
	// it the repartition topic's, or when that does not exist yet the
	// count the stage creates it with.
	hop2 int
	// repartition is REPARTITION_TOPIC's count, 0 when it does not exist.
	repartition int
	checkpoint  *topicState
}

// checkTopics checks the input, output, dead-letter, repartition and
// (Kafka store) checkpoint topics.
func (c *checker) checkTopics(ctx context.Context, conn *config.Connection) topicCounts {
	cfg := c.cfg
	if !cfg.RunsDedup() {
		return c.checkRekeyTopics(ctx, conn)
	}
	names := []string{cfg.InputTopic, cfg.OutputTopic}
	if cfg.DeadLetterTopic != "" {
		names = append(names, cfg.DeadLetterTopic)
	}
	if cfg.DroppedTopic != "" {
		names = append(names, cfg.DroppedTopic)
	}
	if cfg.RepartitionTopic != "" {
		names = append(names, cfg.RepartitionTopic)
	}
	kafkaStore := cfg.CheckpointStore == config.StoreKafka
	if kafkaStore {
		names = append(names, cfg.CheckpointTopic)
	}
	topics := c.describeTopics(ctx, conn, names)

	missing := func(name, variable string, t *topicState) bool {
		switch {
		case errors.Is(t.err, service.ErrTopicNotFound):
			c.report(checkFail, name, "%s does not exist: create it, or correct %s", t.name, variable)
		case t.err != nil:
			c.report(checkFail, name, "%s: %v", t.name, t.err)
		default:
			return false
		}
		return true
	}

	in := topics[cfg.InputTopic]
	if !missing("input topic", "INPUT_TOPIC", in) {
		c.report(checkOK, "input topic", "%s: %d partition(s)", in.name, in.partitions)
	}

	out := topics[cfg.OutputTopic]
	if !missing("output topic", "OUTPUT_TOPIC", out) {
		switch {
		case in.err != nil:
			c.report(checkOK, "output topic", "%s: %d partition(s)", out.name, out.partitions)
		case out.partitions == in.partitions:
			c.report(checkOK, "output topic", "%s: %d partition(s), as the input: each record keeps its partition", out.name, out.partitions)
		default:
			// The stage works with any count; only equal counts keep
			// partitions (docs/processor.md, "Output partition").
			c.report(checkWarn, "output topic", "%s: %d partition(s), the input %d: records are hashed over the output (murmur2) and a restore scans every output partition; equal counts keep each record's partition",
				out.name, out.partitions, in.partitions)
		}
		c.checkMessageBytes(out)
	}

	if cfg.DeadLetterTopic != "" {
		dl := topics[cfg.DeadLetterTopic]
		if !missing("dead-letter topic", "DEAD_LETTER_TOPIC", dl) {
			c.report(checkOK, "dead-letter topic", "%s: %d partition(s)", dl.name, dl.partitions)
		}
	}
	if cfg.DroppedTopic != "" {
		dt := topics[cfg.DroppedTopic]
		if !missing("drop topic", "DROPPED_TOPIC", dt) {
			c.report(checkOK, "drop topic", "%s: %d partition(s), sample rate %v", dt.name, dt.partitions, cfg.DroppedSampleRate)
			if strings.Contains(dt.configs["cleanup.policy"], "compact") {
				c.report(checkWarn, "drop topic cleanup.policy", "%s: compacted: duplicates without a record key are not written there (logged, counted in dedup_dropped_skipped_total{reason=\"refused\"})", dt.name)
			}
		}
	}

	var counts topicCounts
	if in.err == nil {
		counts.input = in.partitions
	}
	// What hop 2 reads, which the checkpoint topic mirrors.
	hop2, hop2Name := in, "the input"
	if cfg.RepartitionTopic != "" {
		rp := topics[cfg.RepartitionTopic]
		c.checkRepartitionTopic(rp, out)
		hop2, hop2Name = rp, "the repartition topic"
		switch {
		case rp.err == nil:
			counts.repartition = rp.partitions
		case errors.Is(rp.err, service.ErrTopicNotFound) && cfg.RepartitionPartitions() > 0:
			hop2, hop2Name = &topicState{name: rp.name, partitions: cfg.RepartitionPartitions()}, "REPARTITION_PARTITIONS"
		case errors.Is(rp.err, service.ErrTopicNotFound):
			hop2 = in // created with the input's count
		}
	}
	if hop2.err == nil {
		counts.hop2 = hop2.partitions
	}

	if kafkaStore {
		counts.checkpoint = topics[cfg.CheckpointTopic]
		c.checkCheckpointTopic(counts.checkpoint, hop2, hop2Name)
	}
	return counts
}

// checkRekeyTopics checks what REPARTITION_HOPS=rekey uses: the input and
// the repartition topic.
func (c *checker) checkRekeyTopics(ctx context.Context, conn *config.Connection) topicCounts {
	cfg := c.cfg
	topics := c.describeTopics(ctx, conn, []string{cfg.InputTopic, cfg.RepartitionTopic})
	in := topics[cfg.InputTopic]
	switch {
	case errors.Is(in.err, service.ErrTopicNotFound):
		c.report(checkFail, "input topic", "%s does not exist: create it, or correct INPUT_TOPIC", in.name)
		return topicCounts{}
	case in.err != nil:
		c.report(checkFail, "input topic", "%s: %v", in.name, in.err)
		return topicCounts{}
	}
	c.report(checkOK, "input topic", "%s: %d partition(s)", in.name, in.partitions)
	// The output is hop 2's: no partition count to compare with.
	rp := topics[cfg.RepartitionTopic]
	c.checkRepartitionTopic(rp, &topicState{err: errNotUsed})
	counts := topicCounts{input: in.partitions}
	if rp.err == nil {
		counts.repartition = rp.partitions
	}
	return counts
}

// errNotUsed stands for a topic the process's role does not use.
var errNotUsed = errors.New("not used by this role")

// minRepartitionRetention is the retention below which the check warns:
// hop 2 may not lag (or be down) longer than the repartition topic keeps
// hop 1's records.
const minRepartitionRetention = 24 * time.Hour

// checkRepartitionTopic: with REPARTITION_TOPIC the stage creates the topic
// when absent; an existing one must not be compacted (compaction keeps one
// record per dedup key and loses the copies and retractions hop 2 must
// see), should keep records long enough for hop 2's lag, and should have
// as many partitions as the output (each record then keeps its
// repartition partition in the output) and as REPARTITION_PARTITIONS says.
func (c *checker) checkRepartitionTopic(rp, out *topicState) {
	cfg := c.cfg
	switch {
	case errors.Is(rp.err, service.ErrTopicNotFound):
		want := "the input's partition count"
		if n := cfg.RepartitionPartitions(); n > 0 {
			want = fmt.Sprintf("%d partition(s)", n)
		}
		c.report(checkWarn, "repartition topic", "%s does not exist: the stage creates it (%s, cleanup.policy=delete, retention.ms=%d) if its user may create topics",
			rp.name, want, repartition.Retention.Milliseconds())
		return
	case rp.err != nil:
		c.report(checkFail, "repartition topic", "%s: %v", rp.name, rp.err)
		return
	case cfg.RepartitionPartitions() > 0 && rp.partitions != cfg.RepartitionPartitions():
		c.report(checkWarn, "repartition topic", "%s: %d partition(s), REPARTITION_PARTITIONS=%d: the stage uses the topic as it is (docs/repartition.md, adding partitions)",
			rp.name, rp.partitions, cfg.RepartitionPartitions())
	default:
		c.checkPartitions("repartition topic", rp, out, "the output",
			"records are hashed over the output (murmur2) and a restore scans every output partition; equal counts keep each record's partition")
	}
	c.checkCleanupPolicy("repartition cleanup.policy", rp, "delete",
		"compaction would keep one record per dedup key and lose copies and retractions")
	if ms, err := strconv.ParseInt(rp.configs["retention.ms"], 10, 64); err == nil && ms >= 0 && time.Duration(ms)*time.Millisecond < minRepartitionRetention {
		c.report(checkWarn, "repartition retention", "%s: retention.ms=%d: records hop 2 has not read within %s are deleted unread (skipped input); keep them at least %s",
			rp.name, ms, time.Duration(ms)*time.Millisecond, minRepartitionRetention)
	}
}

// checkMessageBytes: the stage caps its batches at the output topic's
// max.message.bytes, so a record between that limit and
// PRODUCE_BATCH_BYTES is refused (dead-lettered or skipped); and a
// compacted output refuses records without a key.
func (c *checker) checkMessageBytes(out *topicState) {
	raw, ok := out.configs["max.message.bytes"]
	if !ok {
		raw, ok = out.configs["message.max.bytes"]
	}
	limit, err := strconv.ParseInt(raw, 10, 64)
	if !ok || err != nil || limit <= 0 {
		c.report(checkWarn, "output max.message.bytes", "%s: not reported by the broker; PRODUCE_BATCH_BYTES=%d must not exceed it", out.name, c.cfg.ProduceBatchBytes)
		return
	}
	if c.cfg.ProduceBatchBytes > limit {
		c.report(checkWarn, "output max.message.bytes", "%s: %d, below PRODUCE_BATCH_BYTES=%d: records larger than the topic's limit are refused (%s); raise max.message.bytes to take them",
			out.name, limit, c.cfg.ProduceBatchBytes, c.refusedGo())
	} else {
		c.report(checkOK, "output max.message.bytes", "%s: %d, at least PRODUCE_BATCH_BYTES=%d", out.name, limit, c.cfg.ProduceBatchBytes)
	}
	if strings.Contains(out.configs["cleanup.policy"], "compact") {
		c.report(checkWarn, "output cleanup.policy", "%s: compacted: input records without a key are refused (%s)", out.name, c.refusedGo())
	}
}

// refusedGo says where refused records go with this configuration.
func (c *checker) refusedGo() string {
	if c.cfg.DeadLetterTopic != "" {
		return "they go to DEAD_LETTER_TOPIC " + c.cfg.DeadLetterTopic
	}
	return "skipped and counted; set DEAD_LETTER_TOPIC to keep them"
}

// checkCheckpointTopic: the Kafka store's topic must be compacted (else
// retention deletes the snapshots) and should have the partitions of what
// hop 2 reads (hop2, named by hop2Name: the input, or with
// REPARTITION_TOPIC the repartition topic). A missing topic is created by
// the stage.
func (c *checker) checkCheckpointTopic(cp, hop2 *topicState, hop2Name string) {
	switch {
	case errors.Is(cp.err, service.ErrTopicNotFound):
		c.report(checkWarn, "checkpoint topic", "%s does not exist: the stage creates it (%s, %s's partitions) if its user may create topics", cp.name, settingsList(), hop2Name)
		return
	case cp.err != nil:
		c.report(checkFail, "checkpoint topic", "%s: %v", cp.name, cp.err)
		return
	default:
		c.checkPartitions("checkpoint topic", cp, hop2, hop2Name,
			"a restore reads snapshots of other partitions too; give it "+hop2Name+"'s count")
	}
	c.checkCleanupPolicy("checkpoint cleanup.policy", cp, "compact", "retention would delete the snapshots")
	c.checkCompaction(cp)
}

// settingsList is checkpoint.TopicSettings as name=value, comma separated.
func settingsList() string {
	var set []string
	for _, ts := range checkpoint.TopicSettings {
		set = append(set, ts.Name+"="+ts.Value)
	}
	return strings.Join(set, ", ")
}

// checkCompaction warns about each compaction setting of the checkpoint
// topic other than the store creates it with (checkpoint.TopicSettings,
// cleanup.policy aside: checked above), naming its value, the recommended
// one and why, and says how to set them. The store works either way.
func (c *checker) checkCompaction(cp *topicState) {
	var off, fix, set []string
	for _, ts := range checkpoint.TopicSettings {
		if ts.Name == "cleanup.policy" {
			continue
		}
		set = append(set, ts.Name+"="+ts.Value)
		v, ok := cp.configs[ts.Name]
		switch {
		case !ok:
			off = append(off, fmt.Sprintf("%s not reported by the broker, recommended %s (%s)", ts.Name, ts.Value, ts.Why))
		case v != ts.Value:
			off = append(off, fmt.Sprintf("%s=%s, recommended %s (%s)", ts.Name, v, ts.Value, ts.Why))
		default:
			continue
		}
		fix = append(fix, ts.Name+"="+ts.Value)
	}
	if len(off) == 0 {
		c.report(checkOK, "checkpoint compaction", "%s: %s", cp.name, strings.Join(set, ", "))
		return
	}
	c.report(checkWarn, "checkpoint compaction", "%s: %s; kafka-configs.sh --alter --entity-type topics --entity-name %s --add-config %s",
		cp.name, strings.Join(off, "; "), cp.name, strings.Join(fix, ","))
}

// checkPartitions reports t's partition count, warning (why) when it
// differs from other's (named by otherName).
func (c *checker) checkPartitions(label string, t, other *topicState, otherName, why string) {
	if other.err == nil && t.partitions != other.partitions {
		c.report(checkWarn, label, "%s: %d partition(s), %s %d: %s", t.name, t.partitions, otherName, other.partitions, why)
		return
	}
	c.report(checkOK, label, "%s: %d partition(s)", t.name, t.partitions)
}

// checkCleanupPolicy fails t unless its cleanup.policy is want (compact:
// among the policies; delete: without compact), saying why the other
// policy is wrong.
func (c *checker) checkCleanupPolicy(label string, t *topicState, want, why string) {
	policy, ok := t.configs["cleanup.policy"]
	compacted := slices.Contains(strings.Split(policy, ","), "compact")
	switch {
	case t.configs == nil || !ok:
		c.report(checkWarn, label, "%s: not reported by the broker; it must be %s", t.name, want)
	case compacted != (want == "compact"):
		c.report(checkFail, label, "%s: cleanup.policy=%s: %s; set cleanup.policy=%s", t.name, policy, why, want)
	default:
		c.report(checkOK, label, "%s: cleanup.policy=%s", t.name, policy)
	}
}

// checkGroups checks the committed offsets of each group the role runs,
// on the topic that group reads and commits: without REPARTITION_TOPIC,
// GROUP_ID on the input; with it, hop 1's group (<GROUP_ID>-repartition)
// on the input (roles both and rekey) and GROUP_ID on the repartition
// topic (roles both and dedup). GROUP_ID never commits input offsets then.
func (c *checker) checkGroups(ctx context.Context, conn *config.Connection, counts topicCounts) {
	cfg := c.cfg
	if cfg.RepartitionTopic == "" {
		if counts.input > 0 {
			c.checkCommitted(ctx, conn, "committed offsets", cfg.GroupID, cfg.InputTopic, counts.input,
				"it starts from its checkpoints, else at KAFKA_START_OFFSET="+cfg.StartOffset)
		}
		return
	}
	if cfg.RunsRekey() && counts.input > 0 {
		c.checkCommitted(ctx, conn, "committed offsets", cfg.RepartitionGroup(), cfg.InputTopic, counts.input,
			"it starts at KAFKA_START_OFFSET="+cfg.StartOffset)
	}
	if cfg.RunsDedup() && counts.repartition > 0 {
		// Not there yet: nothing committed on it either.
		c.checkCommitted(ctx, conn, "repartition offsets", cfg.GroupID, cfg.RepartitionTopic, counts.repartition,
			"it starts from its checkpoints, else at the topic's start (hop 2 reads all hop 1 sent, whatever KAFKA_START_OFFSET says)")
	}
}

// checkCommitted warns about group's committed offsets on topic below its
// log start: the records between them were deleted before the group read
// them, and the stage skips them (reported as skipped input when it
// starts). none says where the group starts without commits.
func (c *checker) checkCommitted(ctx context.Context, conn *config.Connection, label, group, topic string, partitions int, none string) {
	client := &kafka.Client{Addr: kafka.TCP(conn.Brokers...), Transport: conn.Transport, Timeout: c.timeout}
	ids := make([]int, partitions)
	for i := range ids {
		ids[i] = i
	}
	cctx, cancel := c.step(ctx)
	defer cancel()
	res, err := client.OffsetFetch(cctx, &kafka.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{topic: ids}})
	if err == nil {
		err = res.Error
	}
	if errors.Is(err, kafka.GroupIdNotFound) {
		err, res = nil, &kafka.OffsetFetchResponse{} // a group never formed has nothing committed
	}
	if err != nil {
		c.report(checkFail, label, "group %s on %s: %v", group, topic, err)
		return
	}
	ranges, err := offsets.List(cctx, client, topic, ids)
	if err != nil {
		c.report(checkFail, label, "log start of %s: %v", topic, err)
		return
	}
	committed := 0
	var below []string
	var lost int64
	for _, p := range res.Topics[topic] {
		if p.Error != nil || p.CommittedOffset < 0 {
			continue
		}
		committed++
		if r, ok := ranges[p.Partition]; ok && p.CommittedOffset < r.First {
			below = append(below, fmt.Sprintf("%d (committed %d, log start %d)", p.Partition, p.CommittedOffset, r.First))
			lost += r.First - p.CommittedOffset
		}
	}
	switch {
	case len(below) > 0:
		slices.Sort(below)
		c.report(checkWarn, label, "group %s: %d record(s) of %s will be skipped, deleted before they were read: partition %s",
			group, lost, topic, strings.Join(below, ", partition "))
	case committed == 0:
		c.report(checkOK, label, "group %s has none on %s: %s", group, topic, none)
	default:
		c.report(checkOK, label, "group %s: %d of %d partition(s) committed, none below the log start", group, committed, partitions)
	}
}
