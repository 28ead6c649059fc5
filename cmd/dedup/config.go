package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"

	"dedup/processor"
	"dedup/processor/assignment"
	"dedup/rotation"
)

// Config is the whole configuration of the binary, read from the environment.
// Every field carries its variable name in an `env` tag; the README's table and
// the deploy manifests are checked against these tags, so a variable is added
// here first.
type Config struct {
	Brokers            string `env:"KAFKA_BROKERS"`
	EmbeddedBrokerAddr string `env:"EMBEDDED_BROKER_ADDR" envDefault:"127.0.0.1:9092"`
	EmbeddedPartitions int    `env:"EMBEDDED_PARTITIONS" envDefault:"3"`
	StartOffset        string `env:"KAFKA_START_OFFSET" envDefault:"earliest"`
	InputTopic         string `env:"INPUT_TOPIC" envDefault:"events"`
	OutputTopic        string `env:"OUTPUT_TOPIC" envDefault:"events-deduped"`
	GroupID            string `env:"GROUP_ID" envDefault:"dedup"`

	SessionTimeout time.Duration `env:"KAFKA_SESSION_TIMEOUT" envDefault:"30s"`
	GroupBalancer  string        `env:"KAFKA_GROUP_BALANCER" envDefault:"sticky"`

	TLSEnabled            bool   `env:"KAFKA_TLS_ENABLED" envDefault:"false"`
	TLSCAFile             string `env:"KAFKA_TLS_CA_FILE"`
	TLSCertFile           string `env:"KAFKA_TLS_CERT_FILE"`
	TLSKeyFile            string `env:"KAFKA_TLS_KEY_FILE"`
	TLSInsecureSkipVerify bool   `env:"KAFKA_TLS_INSECURE_SKIP_VERIFY" envDefault:"false"`
	SASLMechanism         string `env:"KAFKA_SASL_MECHANISM"`
	SASLUsername          string `env:"KAFKA_SASL_USERNAME"`
	SASLPassword          string `env:"KAFKA_SASL_PASSWORD"`

	Key           string        `env:"DEDUP_KEY" envDefault:"key"`
	Mode          string        `env:"DEDUP_MODE" envDefault:"counting"`
	Window        time.Duration `env:"DEDUP_WINDOW" envDefault:"1h"`
	ExpectedKeys  uint64        `env:"DEDUP_EXPECTED_KEYS" envDefault:"1000000"`
	FPRate        float64       `env:"DEDUP_FP_RATE" envDefault:"0.001"`
	RetractHeader string        `env:"DEDUP_RETRACT_HEADER" envDefault:"dedup-retract"`

	ProduceBatchSize    int           `env:"PRODUCE_BATCH_SIZE" envDefault:"1000"`
	ProduceBatchBytes   int64         `env:"PRODUCE_BATCH_BYTES" envDefault:"1048576"`
	ProduceBatchTimeout time.Duration `env:"PRODUCE_BATCH_TIMEOUT" envDefault:"5ms"`
	FetchMinBytes       int           `env:"FETCH_MIN_BYTES" envDefault:"1"`
	FetchMaxBytes       int           `env:"FETCH_MAX_BYTES" envDefault:"10485760"`
	FetchMaxWait        time.Duration `env:"FETCH_MAX_WAIT" envDefault:"250ms"`

	CheckpointStore    string        `env:"CHECKPOINT_STORE"`
	CheckpointTopic    string        `env:"CHECKPOINT_TOPIC"`
	CheckpointDir      string        `env:"CHECKPOINT_DIR"`
	CheckpointInterval time.Duration `env:"CHECKPOINT_INTERVAL" envDefault:"10s"`
	CheckpointKeep     int           `env:"CHECKPOINT_KEEP" envDefault:"3"`

	MetricsAddr     string        `env:"METRICS_ADDR" envDefault:":9464"`
	DataDir         string        `env:"DATA_DIR" envDefault:"./data"`
	LogLevel        string        `env:"LOG_LEVEL" envDefault:"info"`
	LogFormat       string        `env:"LOG_FORMAT" envDefault:"text"`
	ShutdownTimeout time.Duration `env:"SHUTDOWN_TIMEOUT" envDefault:"30s"`
}

// Checkpoint store kinds (CHECKPOINT_STORE).
const (
	storeKafka = "kafka"
	storeFile  = "file"
)

// Problem is one thing wrong with the configuration, named by its variable.
type Problem struct {
	Var string
	Msg string
}

func (p Problem) Error() string { return p.Var + ": " + p.Msg }

// ConfigError lists every configuration problem found, so that one run shows
// them all.
type ConfigError struct {
	Problems []Problem
}

func (e *ConfigError) Error() string {
	msgs := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		msgs[i] = p.Error()
	}
	return "invalid configuration: " + strings.Join(msgs, "; ")
}

// LookupFunc reads one environment variable, like os.LookupEnv.
type LookupFunc func(string) (string, bool)

// configVars maps each Config field name to its environment variable, read
// from the struct tags; caarlos0/env names fields in its errors and the user
// only knows variables.
func configVars() map[string]string {
	t := reflect.TypeFor[Config]()
	vars := make(map[string]string, t.NumField())
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("env"), ",")
		if name != "" {
			vars[f.Name] = name
		}
	}
	return vars
}

// ConfigVarNames lists every environment variable the binary reads, in struct order.
func ConfigVarNames() []string {
	t := reflect.TypeFor[Config]()
	var names []string
	for f := range t.Fields() {
		if name, _, _ := strings.Cut(f.Tag.Get("env"), ","); name != "" {
			names = append(names, name)
		}
	}
	return names
}

// LoadConfig reads and validates the configuration. Its error is a
// *ConfigError naming every bad variable.
func LoadConfig(lookup LookupFunc) (Config, error) {
	environ := make(map[string]string)
	for _, name := range ConfigVarNames() {
		if v, ok := lookup(name); ok {
			environ[name] = v
		}
	}
	var cfg Config
	var problems []Problem
	if err := env.ParseWithOptions(&cfg, env.Options{Environment: environ}); err != nil {
		problems = append(problems, translateEnvError(err, environ)...)
	}
	unparsed := make(map[string]bool, len(problems))
	for _, p := range problems {
		unparsed[p.Var] = true
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
		return cfg, &ConfigError{Problems: problems}
	}
	return cfg, nil
}

// translateEnvError turns caarlos0/env's errors, which name Go fields, into
// problems naming environment variables.
func translateEnvError(err error, environ map[string]string) []Problem {
	vars := configVars()
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
			problems = append(problems, Problem{Var: "environment", Msg: e.Error()})
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
		return "a non-negative integer"
	case t.Kind() == reflect.Int || t.Kind() == reflect.Int64:
		return "an integer"
	case t.Kind() == reflect.Float64:
		return "a number"
	}
	return t.String()
}

// applyDerivedDefaults fills the defaults that depend on other variables.
func (c *Config) applyDerivedDefaults() {
	c.Brokers = strings.TrimSpace(c.Brokers)
	if c.CheckpointStore == "" {
		c.CheckpointStore = storeKafka
		if c.Embedded() {
			c.CheckpointStore = storeFile
		}
	}
	if c.CheckpointTopic == "" {
		c.CheckpointTopic = c.GroupID + "-dedup-state"
	}
	if c.CheckpointDir == "" {
		c.CheckpointDir = filepath.Join(c.DataDir, "checkpoints")
	}
}

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
	hostPort := func(v, addr string) {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			bad(v, "must be host:port, got %q", addr)
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
		hostPort("KAFKA_BROKERS", b)
	}
	if c.Embedded() {
		hostPort("EMBEDDED_BROKER_ADDR", c.EmbeddedBrokerAddr)
		if c.TLSEnabled {
			bad("KAFKA_TLS_ENABLED", "the embedded broker (KAFKA_BROKERS empty) speaks plaintext; set KAFKA_BROKERS to use TLS")
		}
	}
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
	// GROUP_ID also names the checkpoint topic and directory.
	if err := checkTopicName(c.GroupID); err != nil {
		bad("GROUP_ID", "%v", strings.Replace(err.Error(), "topic name", "group id", 1))
	}
	positive("KAFKA_SESSION_TIMEOUT", c.SessionTimeout)
	if _, _, err := assignment.Balancers(strings.ToLower(c.GroupBalancer), nil); err != nil {
		bad("KAFKA_GROUP_BALANCER", "must be sticky, range or roundrobin, got %q", c.GroupBalancer)
	}

	c.validateSecurity(bad)

	if _, err := processor.ParseKeySource(c.Key); err != nil {
		bad("DEDUP_KEY", "%v (want key, value, header:NAME or json:dotted.path)", err)
	}
	if _, err := rotation.ParseMode(c.Mode); err != nil {
		bad("DEDUP_MODE", "must be counting or plain, got %q", c.Mode)
	}
	positive("DEDUP_WINDOW", c.Window)
	if c.ExpectedKeys == 0 {
		bad("DEDUP_EXPECTED_KEYS", "must be > 0")
	}
	if !(c.FPRate > 0 && c.FPRate < 1) {
		bad("DEDUP_FP_RATE", "must be in (0, 1), got %v", c.FPRate)
	}
	if strings.TrimSpace(c.RetractHeader) != c.RetractHeader || c.RetractHeader == "" {
		bad("DEDUP_RETRACT_HEADER", "must be a header name without surrounding blanks, got %q", c.RetractHeader)
	}

	positiveInt("PRODUCE_BATCH_SIZE", int64(c.ProduceBatchSize))
	positiveInt("PRODUCE_BATCH_BYTES", c.ProduceBatchBytes)
	positive("PRODUCE_BATCH_TIMEOUT", c.ProduceBatchTimeout)
	positiveInt("FETCH_MIN_BYTES", int64(c.FetchMinBytes))
	positiveInt("FETCH_MAX_BYTES", int64(c.FetchMaxBytes))
	if c.FetchMaxBytes > 0 && c.FetchMinBytes > c.FetchMaxBytes {
		bad("FETCH_MIN_BYTES", "must not exceed FETCH_MAX_BYTES (%d > %d)", c.FetchMinBytes, c.FetchMaxBytes)
	}
	positive("FETCH_MAX_WAIT", c.FetchMaxWait)

	switch c.CheckpointStore {
	case storeKafka:
		if err := checkTopicName(c.CheckpointTopic); err != nil {
			bad("CHECKPOINT_TOPIC", "%v", err)
		}
		if c.CheckpointTopic == c.InputTopic || c.CheckpointTopic == c.OutputTopic {
			bad("CHECKPOINT_TOPIC", "must differ from INPUT_TOPIC and OUTPUT_TOPIC, got %q", c.CheckpointTopic)
		}
	case storeFile:
		dirOrAbsent("CHECKPOINT_DIR", c.CheckpointDir)
	default:
		bad("CHECKPOINT_STORE", "must be kafka or file, got %q", c.CheckpointStore)
	}
	positive("CHECKPOINT_INTERVAL", c.CheckpointInterval)
	if c.CheckpointKeep < 1 {
		bad("CHECKPOINT_KEEP", "must be >= 1, got %d", c.CheckpointKeep)
	}

	if c.MetricsAddr != "" {
		hostPort("METRICS_ADDR", c.MetricsAddr)
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
func (c *Config) filterOptions() rotation.Options {
	mode, _ := rotation.ParseMode(c.Mode)
	return rotation.Options{ExpectedKeys: c.ExpectedKeys, FPRate: c.FPRate, Window: c.Window, Mode: mode}
}
