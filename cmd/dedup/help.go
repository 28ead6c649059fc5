package main

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// varDoc documents one environment variable for `dedup help` and the README.
// A test keeps this list and the Config struct in step.
type varDoc struct {
	Name, Meaning, Default string
}

var varDocs = []varDoc{
	{"KAFKA_BROKERS", "comma-separated bootstrap servers; empty = embedded broker", "empty"},
	{"EMBEDDED_BROKER_ADDR", "listen address of the embedded broker", "127.0.0.1:9092"},
	{"EMBEDDED_PARTITIONS", "partitions of the input and output topics the embedded broker creates", "3"},
	{"KAFKA_START_OFFSET", "where a group with no committed offset and no checkpoint starts: earliest or latest", "earliest"},
	{"INPUT_TOPIC", "topic to deduplicate", "events"},
	{"OUTPUT_TOPIC", "topic that receives first occurrences (must differ from INPUT_TOPIC)", "events-deduped"},
	{"GROUP_ID", "consumer group; also names the state", "dedup"},
	{"KAFKA_SESSION_TIMEOUT", "consumer-group session timeout (Go duration); a killed member's partitions move after this", "30s"},
	{"KAFKA_GROUP_BALANCER", "how the group assigns input partitions: sticky (keeps partitions with their owner), range or roundrobin", "sticky"},
	{"KAFKA_TLS_ENABLED", "connect to the brokers with TLS", "false"},
	{"KAFKA_TLS_CA_FILE", "PEM file of CAs to verify the brokers with; empty = system roots", "empty"},
	{"KAFKA_TLS_CERT_FILE", "PEM client certificate for mutual TLS (with KAFKA_TLS_KEY_FILE)", "empty"},
	{"KAFKA_TLS_KEY_FILE", "PEM private key of KAFKA_TLS_CERT_FILE", "empty"},
	{"KAFKA_TLS_INSECURE_SKIP_VERIFY", "skip verifying the brokers' certificates (testing only)", "false"},
	{"KAFKA_SASL_MECHANISM", "SASL mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512; empty = no SASL", "empty"},
	{"KAFKA_SASL_USERNAME", "SASL user (required with a mechanism)", "empty"},
	{"KAFKA_SASL_PASSWORD", "SASL password (required with a mechanism)", "empty"},
	{"DEDUP_KEY", "where the dedup key comes from: key, value, header:NAME, json:dotted.path", "key"},
	{"DEDUP_MODE", "filter kind: counting (applies retractions) or plain (about a fifth of the memory; retractions are forwarded but not applied)", "counting"},
	{"DEDUP_WINDOW", "Go duration: a key forwarded less than this earlier (by record timestamp) is dropped", "1h"},
	{"DEDUP_EXPECTED_KEYS", "distinct keys per partition per window the filters are sized for", "1000000"},
	{"DEDUP_FP_RATE", "target false-positive rate at that size, in (0, 1)", "0.001"},
	{"DEDUP_RETRACT_HEADER", "header whose presence marks a retraction", "dedup-retract"},
	{"PRODUCE_BATCH_SIZE", "records per produce batch", "1000"},
	{"PRODUCE_BATCH_BYTES", "bytes per produce batch", "1048576"},
	{"PRODUCE_BATCH_TIMEOUT", "longest wait to fill a produce batch (Go duration)", "5ms"},
	{"FETCH_MIN_BYTES", "bytes a fetch waits for", "1"},
	{"FETCH_MAX_BYTES", "most bytes one fetch returns", "10485760"},
	{"FETCH_MAX_WAIT", "longest a fetch waits for FETCH_MIN_BYTES (Go duration)", "250ms"},
	{"CHECKPOINT_STORE", "kafka (compacted topic) or file", "kafka with brokers, file embedded"},
	{"CHECKPOINT_TOPIC", "topic for the kafka store (created compacted when missing)", "<GROUP_ID>-dedup-state"},
	{"CHECKPOINT_DIR", "directory for the file store", "<DATA_DIR>/checkpoints"},
	{"CHECKPOINT_INTERVAL", "Go duration between checkpoints", "10s"},
	{"CHECKPOINT_KEEP", "snapshots kept per partition (older ones are the fallback when the newest is corrupt)", "3"},
	{"METRICS_ADDR", "HTTP listen address for /metrics, /healthz, /readyz; empty = no HTTP server", ":9464"},
	{"DATA_DIR", "local data (embedded broker, file checkpoints)", "./data"},
	{"LOG_LEVEL", "debug, info, warn or error", "info"},
	{"LOG_FORMAT", "text or json (log/slog, on stderr)", "text"},
	{"SHUTDOWN_TIMEOUT", "how long a SIGTERM/SIGINT stop may take to flush, checkpoint, commit and leave the group", "30s"},
}

const usageHead = `dedup: drops duplicate records from a Kafka topic (Bloom filters rotating on event-time windows).

Usage:
  dedup [run]                  run the stage until SIGTERM/SIGINT; with KAFKA_BROKERS empty it
                               starts an embedded broker on EMBEDDED_BROKER_ADDR first
  dedup demo [flags]           embedded broker + stage + generator of duplicate-laden traffic,
                               with a live progress line; 'dedup demo -h' lists the flags
  dedup demo --generate-only   only the traffic generator, against KAFKA_BROKERS
  dedup inspect                print, per partition, what the checkpoint store holds
  dedup bench [flags]          benchmarks ('dedup bench -h')
  dedup size [flags]           filter memory for a window/key count/FP rate ('dedup size -h')
  dedup healthcheck            exit 0 when /healthz on METRICS_ADDR answers 200 (container HEALTHCHECK)
  dedup help                   this text

Exit codes: 0 ok, 1 runtime failure, 2 configuration error.

Configuration (environment variables):
`

func printUsage(w io.Writer) {
	fmt.Fprint(w, usageHead)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  VARIABLE\tDEFAULT\tMEANING")
	for _, d := range varDocs {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", d.Name, d.Default, d.Meaning)
	}
	tw.Flush()
}
