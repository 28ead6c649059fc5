package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// envMap is a fake environment for LoadConfig and run.
type envMap map[string]string

func (e envMap) lookup(k string) (string, bool) {
	v, ok := e[k]
	return v, ok
}

func TestConfigDefaults(t *testing.T) {
	cfg, err := LoadConfig(envMap{}.lookup)
	if err != nil {
		t.Fatalf("LoadConfig with an empty environment: %v", err)
	}
	if !cfg.Embedded() {
		t.Error("empty KAFKA_BROKERS should select the embedded broker")
	}
	checks := []struct {
		name string
		got  any
		want any
	}{
		{"EMBEDDED_BROKER_ADDR", cfg.EmbeddedBrokerAddr, "127.0.0.1:9092"},
		{"KAFKA_START_OFFSET", cfg.StartOffset, "earliest"},
		{"INPUT_TOPIC", cfg.InputTopic, "events"},
		{"OUTPUT_TOPIC", cfg.OutputTopic, "events-deduped"},
		{"GROUP_ID", cfg.GroupID, "dedup"},
		{"DEDUP_WINDOW", cfg.Window, time.Hour},
		{"DEDUP_EXPECTED_KEYS", cfg.ExpectedKeys, uint64(1000000)},
		{"DEDUP_FP_RATE", cfg.FPRate, 0.001},
		{"CHECKPOINT_STORE", cfg.CheckpointStore, "file"},
		{"CHECKPOINT_TOPIC", cfg.CheckpointTopic, "dedup-dedup-state"},
		{"CHECKPOINT_DIR", cfg.CheckpointDir, filepath.Join("data", "checkpoints")},
		{"CHECKPOINT_INTERVAL", cfg.CheckpointInterval, 10 * time.Second},
		{"KAFKA_SESSION_TIMEOUT", cfg.SessionTimeout, 30 * time.Second},
		{"KAFKA_GROUP_BALANCER", cfg.GroupBalancer, "sticky"},
		{"METRICS_ADDR", cfg.MetricsAddr, ":9464"},
		{"DATA_DIR", cfg.DataDir, "./data"},
		{"SHUTDOWN_TIMEOUT", cfg.ShutdownTimeout, 30 * time.Second},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s default = %v, want %v", c.name, c.got, c.want)
		}
	}
}

func TestConfigDerivedDefaultsWithBrokers(t *testing.T) {
	cfg, err := LoadConfig(envMap{"KAFKA_BROKERS": " k1:9092, k2:9092 ,", "GROUP_ID": "g1", "DATA_DIR": "/var/lib/dedup"}.lookup)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := cfg.BrokerList(), []string{"k1:9092", "k2:9092"}; !slices.Equal(got, want) {
		t.Errorf("BrokerList = %q, want %q", got, want)
	}
	if cfg.CheckpointStore != "kafka" || cfg.CheckpointTopic != "g1-dedup-state" || cfg.CheckpointDir != "/var/lib/dedup/checkpoints" {
		t.Errorf("derived defaults = %q %q %q", cfg.CheckpointStore, cfg.CheckpointTopic, cfg.CheckpointDir)
	}
}

func TestConfigGroupBalancerAnyCase(t *testing.T) {
	for _, v := range []string{"sticky", "STICKY", "Range", "roundRobin"} {
		if _, err := LoadConfig(envMap{"KAFKA_GROUP_BALANCER": v}.lookup); err != nil {
			t.Errorf("KAFKA_GROUP_BALANCER=%s: %v", v, err)
		}
	}
}

func TestConfigKafkaStoreWithEmbeddedBrokerAllowed(t *testing.T) {
	if _, err := LoadConfig(envMap{"CHECKPOINT_STORE": "kafka"}.lookup); err != nil {
		t.Fatalf("CHECKPOINT_STORE=kafka with the embedded broker: %v", err)
	}
}

// badValue is one wrong setting; env holds what else the case needs.
type badValue struct {
	name  string // variable the error must name
	value string
	env   envMap
}

func badValues(t *testing.T) []badValue {
	dir := t.TempDir()
	file := filepath.Join(dir, "regular-file")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.pem")
	return []badValue{
		{name: "KAFKA_BROKERS", value: "broker-without-port"},
		{name: "EMBEDDED_BROKER_ADDR", value: "no-port"},
		{name: "EMBEDDED_PARTITIONS", value: "0"},
		{name: "KAFKA_START_OFFSET", value: "middle"},
		{name: "INPUT_TOPIC", value: "bad topic"},
		{name: "OUTPUT_TOPIC", value: "events"}, // equals INPUT_TOPIC
		{name: "GROUP_ID", value: "my group/1"},
		{name: "KAFKA_SESSION_TIMEOUT", value: "0s"},
		{name: "KAFKA_GROUP_BALANCER", value: "cooperative-sticky"},
		{name: "KAFKA_TLS_ENABLED", value: "maybe"},
		{name: "KAFKA_TLS_CA_FILE", value: missing, env: envMap{"KAFKA_BROKERS": "k:9092", "KAFKA_TLS_ENABLED": "true"}},
		{name: "KAFKA_TLS_CERT_FILE", value: missing, env: envMap{"KAFKA_BROKERS": "k:9092", "KAFKA_TLS_ENABLED": "true", "KAFKA_TLS_KEY_FILE": file}},
		{name: "KAFKA_TLS_KEY_FILE", value: missing, env: envMap{"KAFKA_BROKERS": "k:9092", "KAFKA_TLS_ENABLED": "true", "KAFKA_TLS_CERT_FILE": file}},
		{name: "KAFKA_TLS_INSECURE_SKIP_VERIFY", value: "sure"},
		{name: "KAFKA_SASL_MECHANISM", value: "GSSAPI", env: envMap{"KAFKA_SASL_USERNAME": "u", "KAFKA_SASL_PASSWORD": "p"}},
		{name: "KAFKA_SASL_USERNAME", value: "", env: envMap{"KAFKA_SASL_MECHANISM": "PLAIN", "KAFKA_SASL_PASSWORD": "p"}},
		{name: "KAFKA_SASL_PASSWORD", value: "", env: envMap{"KAFKA_SASL_MECHANISM": "SCRAM-SHA-512", "KAFKA_SASL_USERNAME": "u"}},
		{name: "DEDUP_KEY", value: "nonsense"},
		{name: "DEDUP_MODE", value: "fuzzy"},
		{name: "DEDUP_WINDOW", value: "-1h"},
		{name: "DEDUP_EXPECTED_KEYS", value: "0"},
		{name: "DEDUP_FP_RATE", value: "1"},
		{name: "DEDUP_RETRACT_HEADER", value: " "},
		{name: "PRODUCE_BATCH_SIZE", value: "0"},
		{name: "PRODUCE_BATCH_BYTES", value: "-5"},
		{name: "PRODUCE_BATCH_TIMEOUT", value: "0s"},
		{name: "FETCH_MIN_BYTES", value: "0"},
		{name: "FETCH_MAX_BYTES", value: "lots"},
		{name: "FETCH_MAX_WAIT", value: "-1s"},
		{name: "CHECKPOINT_STORE", value: "s3"},
		{name: "CHECKPOINT_TOPIC", value: "bad topic", env: envMap{"CHECKPOINT_STORE": "kafka"}},
		{name: "CHECKPOINT_DIR", value: file},
		{name: "CHECKPOINT_INTERVAL", value: "10"}, // a bare number is not a Go duration
		{name: "CHECKPOINT_KEEP", value: "0"},
		{name: "METRICS_ADDR", value: "9464"},
		{name: "DATA_DIR", value: file},
		{name: "LOG_LEVEL", value: "loud"},
		{name: "LOG_FORMAT", value: "xml"},
		{name: "SHUTDOWN_TIMEOUT", value: "0s"},
	}
}

func TestConfigBadValueNamesVariable(t *testing.T) {
	cases := badValues(t)
	var covered []string
	for _, c := range cases {
		covered = append(covered, c.name)
	}
	slices.Sort(covered)
	want := slices.Sorted(slices.Values(ConfigVarNames()))
	if !slices.Equal(covered, want) {
		t.Fatalf("the table must cover every variable of Config exactly once:\n got %q\nwant %q", covered, want)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := envMap{c.name: c.value}
			for k, v := range c.env {
				env[k] = v
			}
			_, err := LoadConfig(env.lookup)
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("%s=%q: want a *ConfigError, got %v", c.name, c.value, err)
			}
			if !slices.ContainsFunc(ce.Problems, func(p Problem) bool { return p.Var == c.name }) {
				t.Fatalf("%s=%q: problems %v do not name %s", c.name, c.value, ce.Problems, c.name)
			}
			if !strings.Contains(err.Error(), c.name) {
				t.Fatalf("error %q does not mention %s", err, c.name)
			}
			for _, p := range ce.Problems {
				if strings.Contains(p.Error(), "field") {
					t.Errorf("problem %q speaks of Go fields, not variables", p)
				}
			}
		})
	}
}

func TestConfigReportsEveryProblemAtOnce(t *testing.T) {
	env := envMap{
		"DEDUP_WINDOW":         "soon",       // parse error
		"FETCH_MAX_BYTES":      "many",       // parse error
		"DEDUP_FP_RATE":        "1.5",        // out of range
		"KAFKA_START_OFFSET":   "yesterday",  // not in the set
		"DEDUP_KEY":            "header:",    // no header name
		"LOG_FORMAT":           "yaml",       // unknown
		"OUTPUT_TOPIC":         "events",     // same as input
		"CHECKPOINT_STORE":     "filesystem", // unknown
		"KAFKA_GROUP_BALANCER": "random",     // unknown
	}
	_, err := LoadConfig(env.lookup)
	var ce *ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("want *ConfigError, got %v", err)
	}
	var got []string
	for _, p := range ce.Problems {
		got = append(got, p.Var)
	}
	for name := range env {
		if !slices.Contains(got, name) {
			t.Errorf("%s not reported; problems: %v", name, ce.Problems)
		}
	}
	if len(ce.Problems) != len(env) {
		t.Errorf("want exactly %d problems (one per bad variable), got %d: %v", len(env), len(ce.Problems), ce.Problems)
	}
}

func TestRunConfigErrorExits2BeforeKafka(t *testing.T) {
	// KAFKA_BROKERS points at a port nobody listens on: a run that got past
	// validation would fail to connect with exit 1 (or hang), not exit 2.
	env := envMap{
		"KAFKA_BROKERS": "127.0.0.1:1",
		"DEDUP_WINDOW":  "forever",
		"DEDUP_MODE":    "fancy",
		"METRICS_ADDR":  "",
	}
	for _, args := range [][]string{nil, {"run"}, {"demo"}, {"inspect"}} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), args, env.lookup, &stdout, &stderr)
		if code != exitConfig {
			t.Errorf("run %q: exit %d, want %d; stderr:\n%s", args, code, exitConfig, stderr.String())
		}
		for _, name := range []string{"DEDUP_WINDOW", "DEDUP_MODE"} {
			if !strings.Contains(stderr.String(), name) {
				t.Errorf("run %q: stderr does not name %s:\n%s", args, name, stderr.String())
			}
		}
	}
}

func TestRunUnknownSubcommandExits2(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"frobnicate"}, envMap{}.lookup, &stdout, &stderr); code != exitConfig {
		t.Fatalf("exit %d, want %d", code, exitConfig)
	}
	if !strings.Contains(stderr.String(), "frobnicate") {
		t.Errorf("stderr does not name the subcommand: %s", stderr.String())
	}
}

func TestDemoGenerateOnlyNeedsBrokers(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"demo", "--generate-only"}, envMap{}.lookup, &stdout, &stderr)
	if code != exitConfig || !strings.Contains(stderr.String(), "KAFKA_BROKERS") {
		t.Fatalf("exit %d, stderr %q; want exit 2 naming KAFKA_BROKERS", code, stderr.String())
	}
}

func TestVarDocsMatchConfig(t *testing.T) {
	var documented []string
	for _, d := range varDocs {
		documented = append(documented, d.Name)
		if d.Meaning == "" || d.Default == "" {
			t.Errorf("%s: meaning and default must be documented", d.Name)
		}
	}
	if !slices.Equal(documented, ConfigVarNames()) {
		t.Fatalf("varDocs (help and README table) out of step with Config:\n got %q\nwant %q", documented, ConfigVarNames())
	}
}
