package main

import (
	"context"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"dedup/checkpoint"
	"dedup/internal/config"
	"dedup/internal/explain"
	"dedup/internal/service"
	"dedup/key"
)

const explainAbout = `With the same environment as the stage, says for each partition (of INPUT_TOPIC,
or of REPARTITION_TOPIC when set) whether its checkpointed filters hold the dedup
key KEY: held or not, in which generation (current, previous, or the legacy pair
kept after a change of filter options), the event-time window each generation
covers, the chance that a key never seen reads as held, and the checkpoint asked
(its offset and age). It only reads the checkpoint store and never adds the key.

KEY is the dedup key as DEDUP_KEY takes it: the record key, the value, the header's
value, or the field's text (a JSON string unescaped, a number as written; for
avro:, protobuf: and jsonschema: the canonical key bytes of docs/keys.md: the
string, or the number in decimal). A composite DEDUP_KEY takes one argument per
part, in order (DEDUP_KEY=header:tenant,json:id: dedup explain tenant-a 42). Put
-- before a key that starts with a dash; --hex takes every part in hexadecimal,
for keys that are not text. With REPARTITION_TOPIC it names the
partition hop 1 routes the key to: only its filters can hold it.

Exit codes: 0 answered (held or not), 1 the checkpoint store or the brokers
could not be read, 2 configuration error or bad arguments.`

// explainFlags are `dedup explain`'s flags.
type explainFlags struct {
	partition *int
	json, hex *bool
}

// newExplainFlagSet defines `dedup explain`'s flags, for parsing and for
// its usage.
func newExplainFlagSet() (*flag.FlagSet, explainFlags) {
	fs := flag.NewFlagSet("dedup explain", flag.ContinueOnError)
	return fs, explainFlags{
		partition: fs.Int("partition", -1, "answer for this partition only; -1: every partition"),
		json:      fs.Bool("json", false, `one JSON object a line, one per partition ("partition", "held", "generation", "windows", "false_positive", "checkpoint")`),
		hex:       fs.Bool("hex", false, "every part of KEY is given in hexadecimal: a binary record key, value or header value"),
	}
}

// explainArgs parses flags anywhere among the key's parts; everything
// after "--" is a part.
func explainArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var parts []string
	for len(args) > 0 {
		if args[0] == "--" {
			return append(parts, args[1:]...), nil
		}
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if used := len(args) - fs.NArg(); used > 0 && args[used-1] == "--" {
			return append(parts, fs.Args()...), nil
		}
		args = fs.Args()
		if len(args) > 0 {
			parts, args = append(parts, args[0]), args[1:]
		}
	}
	return parts, nil
}

// runExplain is `dedup explain KEY...`.
func runExplain(ctx context.Context, args []string, lookup config.LookupFunc, stdout, stderr io.Writer) int {
	fs, flags := newExplainFlagSet()
	part := flags.partition
	fs.SetOutput(io.Discard)
	parts, err := explainArgs(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		printCommandUsage(stdout, commandNamed("explain"))
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "dedup explain: %v; 'dedup explain -h' for the usage\n", err)
		return exitConfig
	}
	if len(parts) == 0 || *part < -1 {
		fmt.Fprintf(stderr, "dedup explain: want the dedup key (one argument per part of a composite DEDUP_KEY) and --partition 0 or more; 'dedup explain -h'\n")
		return exitConfig
	}
	cfg, log, code := setup(lookup, stderr)
	if code != exitOK {
		return code
	}
	src, err := key.Parse(cfg.Key) // validated with the configuration
	if err != nil {
		fmt.Fprintf(stderr, "dedup explain: %v\n", err)
		return exitConfig
	}
	raw := make([][]byte, len(parts))
	for i, p := range parts {
		raw[i] = []byte(p)
		if !*flags.hex {
			continue
		}
		if raw[i], err = hex.DecodeString(p); err != nil {
			fmt.Fprintf(stderr, "dedup explain: part %d (%q) is not hexadecimal: %v\n", i+1, p, err)
			return exitConfig
		}
		parts[i] = string(raw[i]) // named as the bytes it stands for
	}
	k, err := src.KeyOf(raw)
	if err != nil {
		fmt.Fprintf(stderr, "dedup explain: %v\n", err)
		return exitConfig
	}
	q := explainQuery{key: k, parts: parts, partition: *part}
	if *flags.json {
		q.format = explainJSON
	}
	return explainKey(ctx, cfg, log, q, stdout, stderr)
}

// explainFormat is how explain prints its answers.
type explainFormat int

const (
	explainText explainFormat = iota
	explainJSON
)

// explainQuery is what `dedup explain` was asked.
type explainQuery struct {
	key       []byte
	parts     []string
	partition int // -1: every one
	format    explainFormat
}

func explainKey(ctx context.Context, cfg *config.Config, log *slog.Logger, q explainQuery, stdout, stderr io.Writer) int {
	brokers := cfg.BrokerList()
	if cfg.Embedded() {
		brokers = []string{cfg.EmbeddedBrokerAddr}
	}
	conn, err := config.NewConnection(cfg, brokers)
	if err != nil {
		log.Error("dedup explain failed", "err", err)
		return exitFailure
	}
	defer conn.Transport.CloseIdleConnections()
	topic := cfg.InputTopic
	if cfg.RepartitionTopic != "" {
		topic = cfg.RepartitionTopic
	}
	count, err := service.TopicPartitions(ctx, conn, topic)
	switch {
	case err == nil:
		if q.partition >= count {
			fmt.Fprintf(stderr, "dedup explain: --partition %d: %s has %d partition(s)\n", q.partition, topic, count)
			return exitConfig
		}
	case cfg.CheckpointStore == config.StoreFile:
		// The filters are in the files: a stopped embedded broker does
		// not keep them from being read.
		log.Warn("partition count not read: answering for the partitions the checkpoint store holds", "topic", topic, "err", err)
		count = 0
	default:
		log.Error("dedup explain failed", "err", err)
		return exitFailure
	}
	reader, where, closeStore, err := openExplainStore(ctx, cfg, conn, log)
	if err != nil {
		log.Error("dedup explain failed", "err", err)
		return exitFailure
	}
	res, err := explain.Explain(ctx, reader, explain.Options{
		Group: cfg.GroupID, Topic: topic, Partitions: count, Partition: q.partition,
		Repartitioned: cfg.RepartitionTopic != "", Filter: cfg.FilterOptions(), Now: time.Now(),
	}, q.key)
	err = errors.Join(err, closeStore())
	if err != nil {
		log.Error("dedup explain failed", "err", err)
		return exitFailure
	}
	if q.format == explainJSON {
		if err := explain.WriteJSON(stdout, res.Answers); err != nil {
			log.Error("dedup explain failed", "err", err)
			return exitFailure
		}
		return exitOK
	}
	quoted := make([]string, len(q.parts))
	for i, p := range q.parts {
		quoted[i] = strconv.Quote(p)
	}
	fmt.Fprintf(stdout, "dedup explain: key %s (DEDUP_KEY=%s), group %s, %s: %d partition(s); checkpoint store %s (%s)\n",
		strings.Join(quoted, " "), cfg.Key, cfg.GroupID, topic, res.Partitions, cfg.CheckpointStore, where)
	if res.KeyPartition >= 0 {
		fmt.Fprintf(stdout, "REPARTITION_TOPIC: hop 1 routes this key to %s/%d (murmur2 over %d partitions): only its filters can hold it\n",
			topic, res.KeyPartition, res.Partitions)
	}
	explain.WriteText(stdout, res.Answers)
	return exitOK
}

// openExplainStore opens the checkpoint store to read; one that does not
// exist is read as empty, never created (both stores create what is
// missing on open).
func openExplainStore(ctx context.Context, cfg *config.Config, conn *config.Connection, log *slog.Logger) (explain.Reader, string, func() error, error) {
	where := "directory " + filepath.Join(cfg.CheckpointDir, cfg.GroupID)
	if cfg.CheckpointStore == config.StoreKafka {
		where = "topic " + cfg.CheckpointTopic + " on " + strings.Join(conn.Brokers, ",")
	}
	nothing := func() error { return nil }
	exists, err := storeExists(ctx, cfg, conn)
	if err != nil {
		return nil, "", nil, err
	}
	if !exists {
		return emptyStore{}, where + ": does not exist", nothing, nil
	}
	store, err := service.OpenStore(ctx, cfg, conn, log)
	if err != nil {
		return nil, "", nil, fmt.Errorf("open checkpoint store: %w", err)
	}
	reader, ok := store.(explain.Reader)
	if !ok {
		return nil, "", nil, errors.Join(fmt.Errorf("open checkpoint store: %T cannot list snapshots", store), store.Close())
	}
	return reader, where, store.Close, nil
}

// emptyStore is a checkpoint store that does not exist: it holds nothing.
type emptyStore struct{}

func (emptyStore) List(context.Context) ([]checkpoint.Entry, error) { return nil, nil }

func (emptyStore) Open(context.Context, checkpoint.Entry) (io.ReadCloser, error) {
	return nil, errors.New("open checkpoint: the store does not exist")
}
