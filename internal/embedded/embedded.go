// Package embedded is the in-process Kafka-protocol broker `dedup` starts
// when KAFKA_BROKERS is empty (twmb/franz-go kfake, data under DATA_DIR).
package embedded

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"dedup/internal/config"
)

// Broker is the in-process Kafka-protocol broker started when
// KAFKA_BROKERS is empty: one kfake node whose log, offsets and groups
// persist under DATA_DIR/broker across restarts.
type Broker struct {
	cluster *kfake.Cluster
	addr    string
	dir     string
}

// Options configures Start.
type Options struct {
	Addr       string   // listen address, e.g. 127.0.0.1:9092
	DataDir    string   // the broker keeps its data in DataDir/broker
	Topics     []string // created with Partitions partitions when missing
	Partitions int
	SASL       *config.Config // when its SASLMechanism is set, the broker requires that user
	Logger     *slog.Logger
}

// Start listens on o.Addr, reloads any data kept under
// o.DataDir and makes sure o.Topics exist.
func Start(ctx context.Context, o Options) (*Broker, error) {
	dir := filepath.Join(o.DataDir, "broker")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create embedded broker dir: %w", err)
	}
	// kfake picks the host itself (127.0.0.1); listening through ListenFn
	// honours the configured host and port, and the broker advertises
	// whatever address the listener reports.
	listen := func(network, _ string) (net.Listener, error) { return net.Listen(network, o.Addr) }
	opts := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.ListenFn(listen),
		kfake.DataDir(dir),
		kfake.DefaultNumPartitions(o.Partitions),
		// Let short KAFKA_SESSION_TIMEOUTs through: the default minimum is 6s.
		kfake.GroupMinSessionTimeout(100 * time.Millisecond),
		kfake.WithLogger(kfakeLogger{o.Logger}),
	}
	var auth *config.Config
	if o.SASL != nil && o.SASL.SASLMechanism != "" {
		auth = o.SASL
		opts = append(opts, kfake.EnableSASL(), kfake.Superuser(auth.SASLMechanism, auth.SASLUsername, auth.SASLPassword))
	}
	cluster, err := kfake.NewCluster(opts...)
	if err != nil {
		return nil, fmt.Errorf("start embedded broker on %s: %w", o.Addr, err)
	}
	b := &Broker{cluster: cluster, addr: cluster.ListenAddrs()[0], dir: dir}
	if err := b.createTopics(ctx, auth, o.Topics, o.Partitions); err != nil {
		cluster.Close()
		return nil, err
	}
	return b, nil
}

// Addr is the address clients bootstrap from.
func (b *Broker) Addr() string { return b.addr }

// Dir is where the broker keeps its data.
func (b *Broker) Dir() string { return b.dir }

// Close stops the broker and writes its state to disk.
func (b *Broker) Close() error {
	b.cluster.Close()
	return nil
}

// createTopics creates the missing topics; a data directory from an earlier
// run already holds some or all of them.
func (b *Broker) createTopics(ctx context.Context, auth *config.Config, topics []string, partitions int) error {
	tr := &kafka.Transport{}
	if auth != nil {
		mech, err := auth.SASL()
		if err != nil {
			return err
		}
		tr.SASL = mech
	}
	defer tr.CloseIdleConnections()
	client := &kafka.Client{Addr: kafka.TCP(b.addr), Transport: tr}
	req := &kafka.CreateTopicsRequest{}
	for _, t := range topics {
		req.Topics = append(req.Topics, kafka.TopicConfig{Topic: t, NumPartitions: partitions, ReplicationFactor: 1})
	}
	resp, err := client.CreateTopics(ctx, req)
	if err != nil {
		return fmt.Errorf("create embedded topics: %w", err)
	}
	var errs []error
	for t, err := range resp.Errors {
		if err != nil && !errors.Is(err, kafka.TopicAlreadyExists) {
			errs = append(errs, fmt.Errorf("create topic %s: %w", t, err))
		}
	}
	return errors.Join(errs...)
}

// PrintKcatHelp tells a new user how to talk to the embedded broker.
func PrintKcatHelp(w io.Writer, addr string, cfg *config.Config) {
	fmt.Fprintf(w, `Embedded Kafka broker listening on %[1]s (data in %[4]s).
Produce keyed records (one "key:value" per line, Ctrl-D to finish):
  kcat -P -b %[1]s -t %[2]s -K:
Read the deduplicated output (-e: exit at its end):
  kcat -C -b %[1]s -t %[3]s -e -q -f '%%k %%s %%h\n'
Retract a key (the next record with it is forwarded again):
  echo 'KEY:' | kcat -P -b %[1]s -t %[2]s -K: -H %[5]s=1
`, addr, cfg.InputTopic, cfg.OutputTopic, filepath.Join(cfg.DataDir, "broker"), cfg.RetractHeader)
}

// kfakeLogger forwards the broker's logs to slog one level quieter: its
// informational messages are per request.
type kfakeLogger struct{ l *slog.Logger }

func (k kfakeLogger) Logf(level kfake.LogLevel, format string, args ...any) {
	if k.l == nil {
		return
	}
	var l slog.Level
	switch level {
	case kfake.LogLevelError:
		l = slog.LevelWarn
	case kfake.LogLevelWarn:
		l = slog.LevelDebug
	default:
		return
	}
	ctx := context.Background()
	if !k.l.Enabled(ctx, l) {
		return
	}
	k.l.Log(ctx, l, fmt.Sprintf(format, args...), "component", "embedded-broker")
}
