package config

import (
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"
	"github.com/segmentio/kafka-go"

	"dedup/key"
	"dedup/processor/assignment"
	"dedup/processor/partition"
	"dedup/rotation"
)

// Config is the whole configuration of the binary, read from the environment.
// Each field's tags are the one place its variable is defined: `env` names it,
// `envDefault` is its default, `help` says what it means and, for defaults
// computed from other variables, `helpDefault` says how (values in single
// quotes, which the README's table sets as code). `dedup help`, the
// README's configuration table (checked by a test) and the deploy manifests
// (checked by deploy/) all follow these tags. `secret:"true"` marks a value
// that is never printed (`dedup check` masks it).
type Config struct {
	Brokers            string        `env:"KAFKA_BROKERS" helpDefault:"empty" help:"comma-separated bootstrap servers; empty = embedded broker"`
	RequireBrokers     bool          `env:"DEDUP_REQUIRE_BROKERS" envDefault:"false" help:"refuse to start (exit 2) when KAFKA_BROKERS is empty instead of starting the embedded broker; the container image sets it"`
	StartupTimeout     time.Duration `env:"KAFKA_STARTUP_TIMEOUT" envDefault:"2m" help:"how long start-up retries reaching the brokers before exiting 1 (Go duration)"`
	EmbeddedBrokerAddr string        `env:"EMBEDDED_BROKER_ADDR" envDefault:"127.0.0.1:9092" help:"listen address of the embedded broker"`
	EmbeddedPartitions int           `env:"EMBEDDED_PARTITIONS" envDefault:"3" help:"partitions of the input and output topics the embedded broker creates"`
	StartOffset        string        `env:"KAFKA_START_OFFSET" envDefault:"earliest" help:"where a group with no committed offset and no checkpoint starts: earliest or latest"`
	InputTopic         string        `env:"INPUT_TOPIC" envDefault:"events" help:"topic to deduplicate"`
	OutputTopic        string        `env:"OUTPUT_TOPIC" envDefault:"events-deduped" help:"topic that receives first occurrences (must differ from INPUT_TOPIC)"`
	GroupID            string        `env:"GROUP_ID" envDefault:"dedup" help:"consumer group; also names the state"`
	RepartitionTopic   string        `env:"REPARTITION_TOPIC" helpDefault:"empty" help:"when set, the input is not assumed to be partitioned by the dedup key: a first hop sends each record keyed by its dedup key to this topic (created if absent) and the stage deduplicates from there (docs/repartition.md)"`
	RepartitionParts   string        `env:"REPARTITION_PARTITIONS" helpDefault:"as many as INPUT_TOPIC" help:"partition count of REPARTITION_TOPIC when the stage creates it"`
	RepartitionHops    string        `env:"REPARTITION_HOPS" helpDefault:"'both'" help:"with REPARTITION_TOPIC, the hops this process runs: both; rekey (hop 1 alone: no filters, checkpoints or output); dedup (hop 2 alone); see docs/repartition.md"`
	DeadLetterTopic    string        `env:"DEAD_LETTER_TOPIC" helpDefault:"empty" help:"topic for records the output refuses for good (too large, invalid), with a dedup-error header naming why; empty = logged, counted and skipped"`
	DroppedTopic       string        `env:"DROPPED_TOPIC" helpDefault:"empty" help:"when set, every record dropped as a duplicate is also written there, exactly once, unchanged, with the source headers and dedup-drop-reason, dedup-drop-generation, dedup-drop-window-start and -end (docs/delivery.md)"`
	DroppedSampleRate  float64       `env:"DROPPED_SAMPLE_RATE" envDefault:"1" help:"share of the duplicates written to DROPPED_TOPIC, 0 < r <= 1, chosen by the dedup key's hash (a key's duplicates are all written or none)"`
	ClientID           string        `env:"KAFKA_CLIENT_ID" envDefault:"dedup" help:"client.id the stage's Kafka clients send (broker logs, quotas, ACL audits)"`

	SessionTimeout time.Duration `env:"KAFKA_SESSION_TIMEOUT" envDefault:"30s" help:"consumer-group session timeout (Go duration); a killed member's partitions move after this"`
	GroupBalancer  string        `env:"KAFKA_GROUP_BALANCER" envDefault:"sticky" help:"how the group assigns input partitions: sticky (keeps partitions with their owner across rebalances, moving only what balance requires), range or roundrobin; any case"`

	TLSEnabled            bool   `env:"KAFKA_TLS_ENABLED" envDefault:"false" help:"connect to the brokers with TLS"`
	TLSCAFile             string `env:"KAFKA_TLS_CA_FILE" helpDefault:"empty" help:"PEM file of CAs to verify the brokers with; empty = system roots"`
	TLSCertFile           string `env:"KAFKA_TLS_CERT_FILE" helpDefault:"empty" help:"PEM client certificate for mutual TLS (with KAFKA_TLS_KEY_FILE)"`
	TLSKeyFile            string `env:"KAFKA_TLS_KEY_FILE" helpDefault:"empty" help:"PEM private key of KAFKA_TLS_CERT_FILE"`
	TLSInsecureSkipVerify bool   `env:"KAFKA_TLS_INSECURE_SKIP_VERIFY" envDefault:"false" help:"skip verifying the brokers' certificates (testing only)"`
	SASLMechanism         string `env:"KAFKA_SASL_MECHANISM" helpDefault:"empty" help:"SASL mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512; empty = no SASL"`
	SASLUsername          string `env:"KAFKA_SASL_USERNAME" helpDefault:"empty" help:"SASL user (required with a mechanism)"`
	SASLPassword          string `env:"KAFKA_SASL_PASSWORD" helpDefault:"empty" secret:"true" help:"SASL password (required with a mechanism)"`

	Key           string        `env:"DEDUP_KEY" envDefault:"key" help:"where the dedup key comes from: key, value, header:NAME, json:dotted.path; avro:dotted.path, protobuf:dotted.path, jsonschema:dotted.path for values framed by a Schema Registry (SCHEMA_REGISTRY_URL); several separated by commas form one identity (header:tenant,json:id): see docs/keys.md"`
	Mode          string        `env:"DEDUP_MODE" envDefault:"fingerprint" help:"filter kind (see dedup size): fingerprint (cuckoo-style, applies retractions, least memory per false drop), counting (counting Bloom, applies retractions) or plain (bits-and-blooms; retractions are forwarded but not applied)"`
	Window        time.Duration `env:"DEDUP_WINDOW" envDefault:"1h" help:"Go duration: a key forwarded less than this earlier (by record timestamp) is dropped"`
	ExpectedKeys  uint64        `env:"DEDUP_EXPECTED_KEYS" envDefault:"1000000" help:"distinct keys per partition per window the filters are sized for (k, M, G suffixes: 10M)"`
	FPRate        float64       `env:"DEDUP_FP_RATE" envDefault:"1e-6" help:"false-positive rate of the pair at that size with both generations full: the share of new records dropped, at worst; 1e-9 to 0.5"`
	RetractHeader string        `env:"DEDUP_RETRACT_HEADER" envDefault:"dedup-retract" help:"header whose presence marks a retraction"`
	MaxClockSkew  time.Duration `env:"DEDUP_MAX_CLOCK_SKEW" envDefault:"5m" help:"Go duration: a record stamped further ahead of the stage's clock is decided without moving the window and counted as a future-timestamp anomaly; applied as at most DEDUP_WINDOW"`

	ProduceBatchSize    int           `env:"PRODUCE_BATCH_SIZE" envDefault:"1000" help:"records per produce batch"`
	ProduceBatchBytes   int64         `env:"PRODUCE_BATCH_BYTES" envDefault:"1048576" help:"bytes per produce batch"`
	ProduceCompression  string        `env:"PRODUCE_COMPRESSION" envDefault:"none" help:"compression of the batches written to the output and the repartition topic: none, gzip, snappy, lz4 or zstd (checkpoint snapshots are zstd-compressed already)"`
	ProduceBatchTimeout time.Duration `env:"PRODUCE_BATCH_TIMEOUT" envDefault:"5ms" help:"longest wait to fill a produce batch (Go duration)"`
	RecoveryTimeout     time.Duration `env:"PRODUCE_RECOVERY_TIMEOUT" envDefault:"1m" help:"how long outputs may stay undeliverable (writer replaced, partitions restored, produce retried) before the stage exits 1 for a restart (Go duration)"`
	FetchMinBytes       int           `env:"FETCH_MIN_BYTES" envDefault:"1" help:"bytes a fetch waits for"`
	FetchMaxBytes       int           `env:"FETCH_MAX_BYTES" envDefault:"10485760" help:"most bytes one fetch returns"`
	FetchBufferBytes    int64         `env:"FETCH_BUFFER_BYTES" envDefault:"33554432" help:"bytes of records fetched but not yet produced, all assigned partitions together; each partition's fetch size, read-ahead queue and outputs in flight are sized from its share (at least 1 MiB): see docs/sizing.md"`
	FetchMaxWait        time.Duration `env:"FETCH_MAX_WAIT" envDefault:"250ms" help:"longest a fetch waits for FETCH_MIN_BYTES (Go duration)"`

	CheckpointStore    string        `env:"CHECKPOINT_STORE" helpDefault:"'kafka' with brokers, 'file' embedded" help:"kafka (compacted topic) or file"`
	CheckpointTopic    string        `env:"CHECKPOINT_TOPIC" helpDefault:"'<GROUP_ID>-dedup-state'" help:"topic for the kafka store (created compacted when missing)"`
	CheckpointDir      string        `env:"CHECKPOINT_DIR" helpDefault:"'<DATA_DIR>/checkpoints'" help:"directory for the file store"`
	CheckpointInterval time.Duration `env:"CHECKPOINT_INTERVAL" envDefault:"10s" help:"Go duration between checkpoints"`
	CheckpointChain    float64       `env:"CHECKPOINT_CHAIN_RATIO" envDefault:"1" help:"checkpoints write what changed (increments) until they reach this multiple of the last full snapshot (base), then a new base; a restore reads at most the base plus this much; 0 = full snapshots only: see docs/checkpoints.md"`
	CheckpointKeep     int           `env:"CHECKPOINT_KEEP" envDefault:"3" help:"snapshots kept per partition (older ones are the fallback when the newest is corrupt)"`
	CheckpointOnDamage string        `env:"CHECKPOINT_ON_DAMAGE" envDefault:"empty" help:"when every snapshot of a partition is damaged: empty = start it with empty filters, loudly (keys seen before may be forwarded again); refuse = do not start it (readiness 503 names it) until the damaged snapshots are repaired or removed: see docs/checkpoints.md"`

	RegistryURL       string        `env:"SCHEMA_REGISTRY_URL" helpDefault:"empty" help:"comma-separated base URLs of a Confluent-compatible Schema Registry, tried in turn; required by the avro:, protobuf: and jsonschema: key sources"`
	RegistryUsername  string        `env:"SCHEMA_REGISTRY_USERNAME" helpDefault:"empty" help:"basic-auth user for the schema registry"`
	RegistryPassword  string        `env:"SCHEMA_REGISTRY_PASSWORD" helpDefault:"empty" secret:"true" help:"basic-auth password for the schema registry"`
	RegistryTimeout   time.Duration `env:"SCHEMA_REGISTRY_TIMEOUT" envDefault:"10s" help:"how long one request to the schema registry may take (Go duration); a record whose schema is not known waits and the request is retried with back-off"`
	RegistryCache     int64         `env:"SCHEMA_REGISTRY_CACHE_BYTES" envDefault:"64M" help:"memory bound of the schemas cached by id (text and references); past it the oldest are fetched again when needed"`
	RegistrySubject   string        `env:"SCHEMA_REGISTRY_SUBJECT" helpDefault:"'<INPUT_TOPIC>-value'" help:"subject whose latest schema dedup check reads to find the key's path (another subject name strategy: the record's full name, or <topic>-<record>)"`
	RegistryTLSCAFile string        `env:"SCHEMA_REGISTRY_TLS_CA_FILE" helpDefault:"empty" help:"PEM file of CAs to verify an https schema registry with; empty = system roots"`
	RegistryCertFile  string        `env:"SCHEMA_REGISTRY_TLS_CERT_FILE" helpDefault:"empty" help:"PEM client certificate for mutual TLS with the schema registry (with SCHEMA_REGISTRY_TLS_KEY_FILE)"`
	RegistryKeyFile   string        `env:"SCHEMA_REGISTRY_TLS_KEY_FILE" helpDefault:"empty" help:"PEM private key of SCHEMA_REGISTRY_TLS_CERT_FILE"`
	RegistryInsecure  bool          `env:"SCHEMA_REGISTRY_TLS_INSECURE_SKIP_VERIFY" envDefault:"false" help:"skip verifying the schema registry's certificate (testing only)"`

	MetricsAddr     string        `env:"METRICS_ADDR" envDefault:":9464" help:"HTTP listen address for /metrics, /healthz, /readyz and the status page at /; empty = no HTTP server"`
	ProbeAddr       string        `env:"PROBE_ADDR" helpDefault:"empty" help:"HTTP listen address of the read-only key probe (GET /probe?key=K: whether this member's live filters hold a dedup key); it tells whether a key was seen, so bind it to localhost or an admin network (docs/operations.md); empty = off"`
	DataDir         string        `env:"DATA_DIR" envDefault:"./data" help:"local data (embedded broker, file checkpoints)"`
	LogLevel        string        `env:"LOG_LEVEL" envDefault:"info" help:"debug, info, warn or error"`
	LogFormat       string        `env:"LOG_FORMAT" envDefault:"text" help:"text or json (log/slog, on stderr)"`
	ShutdownTimeout time.Duration `env:"SHUTDOWN_TIMEOUT" envDefault:"30s" help:"how long a SIGTERM/SIGINT stop may take to flush, checkpoint, commit and leave the group"`
}

// Checkpoint store kinds (CHECKPOINT_STORE).
const (
	StoreKafka = "kafka"
	StoreFile  = "file"
)

// Problem is one thing wrong with the configuration, named by its variable.
type Problem struct {
	Var string
	Msg string
}

func (p Problem) Error() string { return p.Var + ": " + p.Msg }

// Error lists every configuration problem found, so that one run shows
// them all.
type Error struct {
	Problems []Problem
}

func (e *Error) Error() string {
	msgs := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		msgs[i] = p.Error()
	}
	return "invalid configuration: " + strings.Join(msgs, "; ")
}

// LookupFunc reads one environment variable, like os.LookupEnv.
type LookupFunc func(string) (string, bool)

// VarDoc is one environment variable as the Config struct defines it.
type VarDoc struct {
	Name    string
	Field   string
	Meaning string
	Default string // the envDefault, or the helpDefault phrase
	Literal bool   // Default is a literal value (envDefault), not a phrase
	Secret  bool   // never printed: `secret:"true"`
}

// configDocs lists every environment variable of Config, in struct order.
func Docs() []VarDoc {
	t := reflect.TypeFor[Config]()
	var docs []VarDoc
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("env"), ",")
		if name == "" {
			continue
		}
		d := VarDoc{Name: name, Field: f.Name, Meaning: f.Tag.Get("help"), Default: f.Tag.Get("helpDefault"),
			Secret: f.Tag.Get("secret") == "true"}
		if def, ok := f.Tag.Lookup("envDefault"); ok {
			d.Default, d.Literal = def, true
		}
		docs = append(docs, d)
	}
	return docs
}

// configDefault is the envDefault of variable name ("" when it has none).
func Default(name string) string {
	for _, d := range Docs() {
		if d.Name == name && d.Literal {
			return d.Default
		}
	}
	return ""
}

// configVars maps each Config field name to its environment variable:
// caarlos0/env names fields in its errors and the user only knows variables.
func fieldVars() map[string]string {
	vars := make(map[string]string)
	for _, d := range Docs() {
		vars[d.Field] = d.Name
	}
	return vars
}

// ConfigVarNames lists every environment variable the binary reads, in struct order.
func VarNames() []string {
	var names []string
	for _, d := range Docs() {
		names = append(names, d.Name)
	}
	return names
}

// Load reads and validates the configuration. Its error is a
// *Error naming every bad variable.
func Load(lookup LookupFunc) (Config, error) {
	environ := make(map[string]string)
	for _, name := range VarNames() {
		if v, ok := lookup(name); ok {
			environ[name] = v
		}
	}
	var cfg Config
	var problems []Problem
	if err := env.ParseWithOptions(&cfg, env.Options{Environment: environ, FuncMap: countParsers()}); err != nil {
		problems = append(problems, translateEnvError(err, environ)...)
	}
	unparsed := make(map[string]bool, len(problems))
	for _, p := range problems {
		unparsed[p.Var] = true
	}
	if v, ok := environ["METRICS_ADDR"]; ok && v == "" {
		// caarlos0/env gives an empty variable its default; set to empty,
		// METRICS_ADDR means no HTTP server at all.
		cfg.MetricsAddr = ""
	}
	cfg.applyDerivedDefaults()
	for _, p := range cfg.validate() {
		// A variable that failed to parse holds its zero value: do not report
		// it a second time as out of range.
		if !unparsed[p.Var] {
			problems = append(problems, p)
		}
	}
	if len(problems) > 0 {
		return cfg, &Error{Problems: problems}
	}
	return cfg, nil
}

// translateEnvError turns caarlos0/env's errors, which name Go fields, into
// problems naming environment variables.
func translateEnvError(err error, environ map[string]string) []Problem {
	vars := fieldVars()
	var agg env.AggregateError
	errs := []error{err}
	if errors.As(err, &agg) {
		errs = agg.Errors
	}
	problems := make([]Problem, 0, len(errs))
	for _, e := range errs {
		var pe env.ParseError
		switch {
		case errors.As(e, &pe):
			name := vars[pe.Name]
			if name == "" {
				name = pe.Name
			}
			msg := fmt.Sprintf("cannot parse %q as %s", environ[name], typeWord(pe.Type))
			if errors.Is(pe.Err, strconv.ErrRange) {
				msg += ": out of range"
			}
			problems = append(problems, Problem{Var: name, Msg: msg})
		default:
			// Not tied to one variable: keep env's words but never a Go
			// field name where a variable name is known.
			msg := e.Error()
			for field, name := range vars {
				msg = strings.ReplaceAll(msg, `"`+field+`"`, name)
			}
			problems = append(problems, Problem{Var: "environment", Msg: msg})
		}
	}
	return problems
}

// typeWord names a field type the way a user writing the variable thinks of it.
func typeWord(t reflect.Type) string {
	switch {
	case t == reflect.TypeFor[time.Duration]():
		return "a Go duration (e.g. 10s, 1h)"
	case t.Kind() == reflect.Bool:
		return "a boolean (true or false)"
	case t.Kind() == reflect.Uint64:
		return "a non-negative whole number (k, M, G suffixes allowed: 10M)"
	case t.Kind() == reflect.Int || t.Kind() == reflect.Int64:
		return "a whole number (k, M, G suffixes allowed: 10M)"
	case t.Kind() == reflect.Float64:
		return "a number"
	}
	return t.String()
}

// applyDerivedDefaults fills the defaults that depend on other variables and
// spells every enumeration the one way the rest of the binary compares:
// enumerations are case-insensitive.
func (c *Config) applyDerivedDefaults() {
	c.Brokers = strings.TrimSpace(c.Brokers)
	for _, s := range []*string{&c.StartOffset, &c.Mode, &c.CheckpointStore, &c.CheckpointOnDamage, &c.LogLevel, &c.LogFormat} {
		*s = strings.ToLower(strings.TrimSpace(*s))
	}
	c.SASLMechanism = strings.ToUpper(strings.TrimSpace(c.SASLMechanism))
	c.Key = normalizeKeySpec(c.Key)
	if c.CheckpointStore == "" {
		c.CheckpointStore = StoreKafka
		if c.Embedded() {
			c.CheckpointStore = StoreFile
		}
	}
	if c.CheckpointTopic == "" {
		c.CheckpointTopic = c.GroupID + "-dedup-state"
	}
	if c.CheckpointDir == "" {
		c.CheckpointDir = filepath.Join(c.DataDir, "checkpoints")
	}
	if c.RegistrySubject == "" {
		c.RegistrySubject = c.InputTopic + "-value" // the serializers' default TopicNameStrategy
	}
}

// normalizeKeySpec lower-cases the kind of DEDUP_KEY (key, value, header:,
// json:) and leaves the header name or JSON path as written: those are
// case-sensitive names.
func normalizeKeySpec(s string) string {
	parts := strings.Split(strings.TrimSpace(s), ",")
	for i, p := range parts {
		p = strings.TrimSpace(p)
		if kind, rest, found := strings.Cut(p, ":"); found {
			parts[i] = strings.ToLower(kind) + ":" + rest
		} else {
			parts[i] = strings.ToLower(p)
		}
	}
	return strings.Join(parts, ",")
}

// embeddedTopics are the topics the embedded broker creates: input,
// output and, when set, the dead-letter and drop topics.
func (c *Config) EmbeddedTopics() []string {
	ts := []string{c.InputTopic, c.OutputTopic}
	for _, t := range []string{c.DeadLetterTopic, c.DroppedTopic} {
		if t != "" {
			ts = append(ts, t)
		}
	}
	return ts
}

// RepartitionPartitions is REPARTITION_PARTITIONS, 0 when empty (as many
// as the input has).
func (c *Config) RepartitionPartitions() int {
	n, _ := strconv.Atoi(c.RepartitionParts)
	return max(n, 0)
}

// The roles of REPARTITION_HOPS.
const (
	HopsBoth  = "both"
	HopsRekey = "rekey" // hop 1 alone: input to repartition topic
	HopsDedup = "dedup" // hop 2 alone: repartition topic to output
)

// Hops is REPARTITION_HOPS with its default: both.
func (c *Config) Hops() string {
	if c.RepartitionHops == "" {
		return HopsBoth
	}
	return c.RepartitionHops
}

// RunsRekey reports whether this process runs hop 1 (REPARTITION_TOPIC
// set, REPARTITION_HOPS both or rekey).
func (c *Config) RunsRekey() bool { return c.RepartitionTopic != "" && c.Hops() != HopsDedup }

// RunsDedup reports whether this process deduplicates: hop 2 with
// REPARTITION_TOPIC (REPARTITION_HOPS both or dedup), the one hop without.
func (c *Config) RunsDedup() bool { return c.RepartitionTopic == "" || c.Hops() != HopsRekey }

// RepartitionGroup is hop 1's consumer group: GROUP_ID with -repartition.
func (c *Config) RepartitionGroup() string { return c.GroupID + "-repartition" }

// Embedded reports whether the binary runs its own broker (KAFKA_BROKERS empty).
func (c *Config) Embedded() bool { return len(c.BrokerList()) == 0 }

// BrokerList splits KAFKA_BROKERS, dropping blanks.
func (c *Config) BrokerList() []string {
	var out []string
	for b := range strings.SplitSeq(c.Brokers, ",") {
		if b = strings.TrimSpace(b); b != "" {
			out = append(out, b)
		}
	}
	return out
}

// validate checks every variable and returns every problem found.
func (c *Config) validate() []Problem {
	var ps []Problem
	bad := func(v, format string, args ...any) {
		ps = append(ps, Problem{Var: v, Msg: fmt.Sprintf(format, args...)})
	}
	positive := func(v string, d time.Duration) {
		if d <= 0 {
			bad(v, "must be a positive duration, got %s", d)
		}
	}
	positiveInt := func(v string, n int64) {
		if n <= 0 {
			bad(v, "must be > 0, got %d", n)
		}
	}
	address := func(v, addr string) {
		if err := checkAddress(addr); err != nil {
			bad(v, "%v", err)
		}
	}

	// A directory is created on first use; anything else in its place is
	// an error now rather than after connecting.
	dirOrAbsent := func(v, path string) {
		if path == "" {
			bad(v, "must not be empty")
			return
		}
		if st, err := os.Stat(path); err == nil && !st.IsDir() {
			bad(v, "%s exists and is not a directory", path)
		}
	}

	for _, b := range c.BrokerList() {
		address("KAFKA_BROKERS", b)
	}
	if c.Embedded() {
		if c.RequireBrokers {
			bad("KAFKA_BROKERS", "must be set: DEDUP_REQUIRE_BROKERS is true (as in the container image), so the embedded broker is off")
		}
		address("EMBEDDED_BROKER_ADDR", c.EmbeddedBrokerAddr)
		if c.TLSEnabled {
			bad("KAFKA_TLS_ENABLED", "the embedded broker (KAFKA_BROKERS empty) speaks plaintext; set KAFKA_BROKERS to use TLS")
		}
	}
	positive("KAFKA_STARTUP_TIMEOUT", c.StartupTimeout)
	if c.EmbeddedPartitions < 1 {
		bad("EMBEDDED_PARTITIONS", "must be >= 1, got %d", c.EmbeddedPartitions)
	}
	if c.StartOffset != "earliest" && c.StartOffset != "latest" {
		bad("KAFKA_START_OFFSET", "must be earliest or latest, got %q", c.StartOffset)
	}
	for _, t := range []struct{ v, name string }{{"INPUT_TOPIC", c.InputTopic}, {"OUTPUT_TOPIC", c.OutputTopic}} {
		if err := checkTopicName(t.name); err != nil {
			bad(t.v, "%v", err)
		}
	}
	if c.InputTopic != "" && c.InputTopic == c.OutputTopic {
		bad("OUTPUT_TOPIC", "must differ from INPUT_TOPIC (both %q)", c.InputTopic)
	}
	if c.RepartitionTopic != "" {
		if err := checkTopicName(c.RepartitionTopic); err != nil {
			bad("REPARTITION_TOPIC", "%v", err)
		} else if c.RepartitionTopic == c.InputTopic || c.RepartitionTopic == c.OutputTopic || c.RepartitionTopic == c.DeadLetterTopic {
			bad("REPARTITION_TOPIC", "must differ from INPUT_TOPIC, OUTPUT_TOPIC and DEAD_LETTER_TOPIC, got %q", c.RepartitionTopic)
		}
	}
	if c.RepartitionParts != "" {
		switch n, err := strconv.Atoi(c.RepartitionParts); {
		case err != nil || n < 1:
			bad("REPARTITION_PARTITIONS", "must be a whole number of at least 1, got %q", c.RepartitionParts)
		case c.RepartitionTopic == "":
			bad("REPARTITION_PARTITIONS", "set without REPARTITION_TOPIC, got %q", c.RepartitionParts)
		}
	}
	if c.RepartitionHops != "" {
		switch c.RepartitionHops {
		case HopsBoth, HopsRekey, HopsDedup:
			if c.RepartitionTopic == "" {
				bad("REPARTITION_HOPS", "set without REPARTITION_TOPIC, got %q: the hops exist only with a repartition topic", c.RepartitionHops)
			}
		default:
			bad("REPARTITION_HOPS", "must be both, rekey or dedup, got %q", c.RepartitionHops)
		}
	}
	if c.DeadLetterTopic != "" {
		if err := checkTopicName(c.DeadLetterTopic); err != nil {
			bad("DEAD_LETTER_TOPIC", "%v", err)
		} else if c.DeadLetterTopic == c.InputTopic || c.DeadLetterTopic == c.OutputTopic {
			bad("DEAD_LETTER_TOPIC", "must differ from INPUT_TOPIC and OUTPUT_TOPIC, got %q", c.DeadLetterTopic)
		}
	}
	if c.DroppedTopic != "" {
		if err := checkTopicName(c.DroppedTopic); err != nil {
			bad("DROPPED_TOPIC", "%v", err)
		} else if slices.Contains([]string{c.InputTopic, c.OutputTopic, c.DeadLetterTopic, c.RepartitionTopic}, c.DroppedTopic) ||
			(c.CheckpointStore == StoreKafka && c.DroppedTopic == c.CheckpointTopic) {
			bad("DROPPED_TOPIC", "must differ from INPUT_TOPIC, OUTPUT_TOPIC, DEAD_LETTER_TOPIC, REPARTITION_TOPIC and CHECKPOINT_TOPIC, got %q", c.DroppedTopic)
		}
	}
	if !(c.DroppedSampleRate > 0 && c.DroppedSampleRate <= 1) {
		bad("DROPPED_SAMPLE_RATE", "must be a number with 0 < r <= 1, got %v", c.DroppedSampleRate)
	}
	// Brokers use client.id in quota and metric names, which take the
	// topic-name alphabet.
	if err := checkTopicName(c.ClientID); err != nil {
		bad("KAFKA_CLIENT_ID", "%v", strings.Replace(err.Error(), "topic name", "client id", 1))
	}
	if _, ok := compressions[c.ProduceCompression]; !ok {
		bad("PRODUCE_COMPRESSION", "must be none, gzip, snappy, lz4 or zstd, got %q", c.ProduceCompression)
	}
	// GROUP_ID also names the checkpoint topic and directory.
	if err := checkTopicName(c.GroupID); err != nil {
		bad("GROUP_ID", "%v", strings.Replace(err.Error(), "topic name", "group id", 1))
	}
	positive("KAFKA_SESSION_TIMEOUT", c.SessionTimeout)
	if _, _, err := assignment.Balancers(strings.ToLower(c.GroupBalancer), nil); err != nil {
		bad("KAFKA_GROUP_BALANCER", "must be sticky, range or roundrobin, got %q", c.GroupBalancer)
	}

	c.validateSecurity(bad)

	if ks, err := key.Parse(c.Key); err != nil {
		bad("DEDUP_KEY", "%v", err)
	} else if ks.Schemas() && c.RegistryURL == "" {
		bad("SCHEMA_REGISTRY_URL", "must be set: DEDUP_KEY %q reads schema-framed values", c.Key)
	}
	c.validateRegistry(bad, positive)
	c.validateFilter(bad)
	if strings.TrimSpace(c.RetractHeader) != c.RetractHeader || c.RetractHeader == "" {
		bad("DEDUP_RETRACT_HEADER", "must be a header name without surrounding blanks, got %q", c.RetractHeader)
	}

	positiveInt("PRODUCE_BATCH_SIZE", int64(c.ProduceBatchSize))
	positiveInt("PRODUCE_BATCH_BYTES", c.ProduceBatchBytes)
	positive("PRODUCE_BATCH_TIMEOUT", c.ProduceBatchTimeout)
	positive("PRODUCE_RECOVERY_TIMEOUT", c.RecoveryTimeout)
	positiveInt("FETCH_MIN_BYTES", int64(c.FetchMinBytes))
	positiveInt("FETCH_MAX_BYTES", int64(c.FetchMaxBytes))
	positiveInt("FETCH_BUFFER_BYTES", c.FetchBufferBytes)
	if c.FetchMaxBytes > 0 && c.FetchMinBytes > c.FetchMaxBytes {
		bad("FETCH_MIN_BYTES", "must not exceed FETCH_MAX_BYTES (%d > %d)", c.FetchMinBytes, c.FetchMaxBytes)
	}
	positive("FETCH_MAX_WAIT", c.FetchMaxWait)

	switch c.CheckpointStore {
	case StoreKafka:
		if err := checkTopicName(c.CheckpointTopic); err != nil {
			bad("CHECKPOINT_TOPIC", "%v", err)
		}
		if c.CheckpointTopic == c.InputTopic || c.CheckpointTopic == c.OutputTopic {
			bad("CHECKPOINT_TOPIC", "must differ from INPUT_TOPIC and OUTPUT_TOPIC, got %q", c.CheckpointTopic)
		}
	case StoreFile:
		dirOrAbsent("CHECKPOINT_DIR", c.CheckpointDir)
	default:
		bad("CHECKPOINT_STORE", "must be kafka or file, got %q", c.CheckpointStore)
	}
	positive("CHECKPOINT_INTERVAL", c.CheckpointInterval)
	positive("DEDUP_MAX_CLOCK_SKEW", c.MaxClockSkew)
	if c.CheckpointChain < 0 || math.IsNaN(c.CheckpointChain) || math.IsInf(c.CheckpointChain, 0) {
		bad("CHECKPOINT_CHAIN_RATIO", "must be a number >= 0, got %v", c.CheckpointChain)
	}
	if c.CheckpointKeep < 1 {
		bad("CHECKPOINT_KEEP", "must be >= 1, got %d", c.CheckpointKeep)
	}
	switch partition.OnDamage(c.CheckpointOnDamage) {
	case partition.OnDamageEmpty, partition.OnDamageRefuse:
	default:
		bad("CHECKPOINT_ON_DAMAGE", "must be empty or refuse, got %q", c.CheckpointOnDamage)
	}

	if c.MetricsAddr != "" {
		address("METRICS_ADDR", c.MetricsAddr)
	}
	if c.ProbeAddr != "" {
		address("PROBE_ADDR", c.ProbeAddr)
		if _, port, _ := net.SplitHostPort(c.ProbeAddr); c.ProbeAddr == c.MetricsAddr && port != "0" {
			bad("PROBE_ADDR", "must differ from METRICS_ADDR (the probe has a listener of its own), got %q", c.ProbeAddr)
		}
	}
	dirOrAbsent("DATA_DIR", c.DataDir)
	if _, err := parseLevel(c.LogLevel); err != nil {
		bad("LOG_LEVEL", "%v", err)
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		bad("LOG_FORMAT", "must be text or json, got %q", c.LogFormat)
	}
	positive("SHUTDOWN_TIMEOUT", c.ShutdownTimeout)
	return ps
}

// validateFilter checks DEDUP_MODE, DEDUP_WINDOW, DEDUP_EXPECTED_KEYS and
// DEDUP_FP_RATE against what rotation accepts (and so what the snapshot
// format can hold), one variable at a time so that each problem is named:
// rotation.New is asked with one key, which costs nothing, and the others
// at values it is known to accept.
func (c *Config) validateFilter(bad func(v, format string, args ...any)) {
	mode, err := rotation.ParseMode(c.Mode)
	if err != nil {
		bad("DEDUP_MODE", "%v", err)
		mode = rotation.Counting
	}
	probe := func(v string, o rotation.Options) {
		if _, err := rotation.New(o); err != nil {
			bad(v, "%s", strings.TrimPrefix(err.Error(), "validate options: "))
		}
	}
	const okRate, okWindow = 0.01, time.Hour
	probe("DEDUP_WINDOW", rotation.Options{ExpectedKeys: 1, FPRate: okRate, Window: c.Window, Mode: mode})
	probe("DEDUP_FP_RATE", rotation.Options{ExpectedKeys: 1, FPRate: c.FPRate, Window: okWindow, Mode: mode})
	// Checked here to name the variable before anything starts, without
	// allocating the filters to find out.
	if c.ExpectedKeys == 0 || c.ExpectedKeys > rotation.MaxExpectedKeys {
		bad("DEDUP_EXPECTED_KEYS", "%d: want 1..%d", c.ExpectedKeys, uint64(rotation.MaxExpectedKeys))
	}
}

// checkAddress checks a host:port to listen on or dial without resolving
// it: the port a number in 0..65535, the host empty, an IP address or a
// DNS name.
func checkAddress(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("must be host:port, got %q", addr)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || port == "" {
		return fmt.Errorf("port %q of %q is not a number in 0..65535", port, addr)
	} else if n > 65535 {
		return fmt.Errorf("port %q of %q is not a number in 0..65535", port, addr)
	}
	if host == "" || net.ParseIP(host) != nil {
		return nil
	}
	if !validHostname(host) {
		return fmt.Errorf("host %q of %q is neither an IP address nor a DNS name", host, addr)
	}
	return nil
}

// validHostname applies RFC 1123 label rules (letters, digits, '-', not at
// either end; labels of 1..63 characters; 253 in all).
func validHostname(h string) bool {
	h = strings.TrimSuffix(h, ".")
	if h == "" || len(h) > 253 {
		return false
	}
	for label := range strings.SplitSeq(h, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return false
			}
		}
	}
	return true
}

// validateSecurity checks the TLS and SASL variables.
func (c *Config) validateSecurity(bad func(v, format string, args ...any)) {
	readable := func(v, path string) {
		if path == "" {
			return
		}
		f, err := os.Open(path)
		if err != nil {
			bad(v, "cannot read file: %v", err)
			return
		}
		f.Close()
	}
	readable("KAFKA_TLS_CA_FILE", c.TLSCAFile)
	readable("KAFKA_TLS_CERT_FILE", c.TLSCertFile)
	readable("KAFKA_TLS_KEY_FILE", c.TLSKeyFile)
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		v := "KAFKA_TLS_KEY_FILE"
		if c.TLSCertFile == "" {
			v = "KAFKA_TLS_CERT_FILE"
		}
		bad(v, "KAFKA_TLS_CERT_FILE and KAFKA_TLS_KEY_FILE go together: set both or neither")
	}
	if !c.TLSEnabled {
		for _, f := range []struct{ v, path string }{{"KAFKA_TLS_CA_FILE", c.TLSCAFile}, {"KAFKA_TLS_CERT_FILE", c.TLSCertFile}} {
			if f.path != "" {
				bad(f.v, "is set but KAFKA_TLS_ENABLED is false")
			}
		}
		if c.TLSInsecureSkipVerify {
			bad("KAFKA_TLS_INSECURE_SKIP_VERIFY", "is set but KAFKA_TLS_ENABLED is false")
		}
	}

	switch c.SASLMechanism {
	case "":
		if c.SASLUsername != "" || c.SASLPassword != "" {
			bad("KAFKA_SASL_MECHANISM", "must be set (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512) when KAFKA_SASL_USERNAME or KAFKA_SASL_PASSWORD is set")
		}
	case saslPlain, saslScram256, saslScram512:
		if c.SASLUsername == "" {
			bad("KAFKA_SASL_USERNAME", "must be set when KAFKA_SASL_MECHANISM is %s", c.SASLMechanism)
		}
		if c.SASLPassword == "" {
			bad("KAFKA_SASL_PASSWORD", "must be set when KAFKA_SASL_MECHANISM is %s", c.SASLMechanism)
		}
	default:
		bad("KAFKA_SASL_MECHANISM", "must be PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512, got %q", c.SASLMechanism)
	}
}

// checkTopicName applies Kafka's topic-name rules, so a typo is reported
// here rather than as a broker error after connecting.
func checkTopicName(name string) error {
	switch {
	case name == "":
		return errors.New("must not be empty")
	case name == "." || name == "..":
		return fmt.Errorf("%q is not a valid topic name", name)
	case len(name) > 249:
		return fmt.Errorf("topic name longer than 249 characters")
	}
	for _, r := range name {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-'
		if !ok {
			return fmt.Errorf("topic name %q may only hold ASCII letters, digits, '.', '_' and '-'", name)
		}
	}
	return nil
}

// filterOptions is the rotation configuration of DEDUP_*.
func (c *Config) FilterOptions() rotation.Options {
	mode, _ := rotation.ParseMode(c.Mode)
	return rotation.Options{ExpectedKeys: c.ExpectedKeys, FPRate: c.FPRate, Window: c.Window, Mode: mode}
}

// compressions are PRODUCE_COMPRESSION's values, in Kafka's own spelling
// (compression.type).
var compressions = map[string]kafka.Compression{
	"none":   0,
	"gzip":   kafka.Gzip,
	"snappy": kafka.Snappy,
	"lz4":    kafka.Lz4,
	"zstd":   kafka.Zstd,
}

// Compression is the codec of the output's and the repartition topic's
// batches; validated with the configuration.
func (c *Config) Compression() kafka.Compression { return compressions[c.ProduceCompression] }

// ParseCompression is the codec a PRODUCE_COMPRESSION value names; ok is
// false for a value it does not take.
func ParseCompression(name string) (codec kafka.Compression, ok bool) {
	codec, ok = compressions[name]
	return codec, ok
}

// ChainRatio is CHECKPOINT_CHAIN_RATIO as the processor takes it: 0 (a full
// snapshot every time) becomes negative, since the processor's zero is its
// default.
func (c *Config) ChainRatio() float64 {
	if c.CheckpointChain == 0 {
		return -1
	}
	return c.CheckpointChain
}
