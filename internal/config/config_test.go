package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"dedup/checkpoint"
	"dedup/internal/testkit"
	"dedup/rotation"
)

func TestConfigDefaults(t *testing.T) {
	cfg, err := Load(testkit.Env{}.Lookup)
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
		{"DEDUP_MODE", cfg.Mode, "fingerprint"},
		{"DEDUP_FP_RATE", cfg.FPRate, 1e-6},
		{"DEDUP_MAX_CLOCK_SKEW", cfg.MaxClockSkew, 5 * time.Minute},
		{"PRODUCE_RECOVERY_TIMEOUT", cfg.RecoveryTimeout, time.Minute},
		{"CHECKPOINT_STORE", cfg.CheckpointStore, "file"},
		{"CHECKPOINT_TOPIC", cfg.CheckpointTopic, "dedup-dedup-state"},
		{"CHECKPOINT_DIR", cfg.CheckpointDir, filepath.Join("data", "checkpoints")},
		{"CHECKPOINT_INTERVAL", cfg.CheckpointInterval, 10 * time.Second},
		{"CHECKPOINT_CHAIN_RATIO", cfg.CheckpointChain, checkpoint.DefaultChainRatio},
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
	cfg, err := Load(testkit.Env{"KAFKA_BROKERS": " k1:9092, k2:9092 ,", "GROUP_ID": "g1", "DATA_DIR": "/var/lib/dedup"}.Lookup)
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
		if _, err := Load(testkit.Env{"KAFKA_GROUP_BALANCER": v}.Lookup); err != nil {
			t.Errorf("KAFKA_GROUP_BALANCER=%s: %v", v, err)
		}
	}
}

func TestConfigKafkaStoreWithEmbeddedBrokerAllowed(t *testing.T) {
	if _, err := Load(testkit.Env{"CHECKPOINT_STORE": "kafka"}.Lookup); err != nil {
		t.Fatalf("CHECKPOINT_STORE=kafka with the embedded broker: %v", err)
	}
}

// badValue is one wrong setting; env holds what else the case needs.

type badValue struct {
	name  string // variable the error must name
	value string
	env   testkit.Env
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
		{name: "DEDUP_REQUIRE_BROKERS", value: "maybe"},
		{name: "KAFKA_STARTUP_TIMEOUT", value: "0s"},
		{name: "EMBEDDED_BROKER_ADDR", value: "no-port"},
		{name: "EMBEDDED_PARTITIONS", value: "0"},
		{name: "KAFKA_START_OFFSET", value: "middle"},
		{name: "INPUT_TOPIC", value: "bad topic"},
		{name: "OUTPUT_TOPIC", value: "events"}, // equals INPUT_TOPIC
		{name: "GROUP_ID", value: "my group/1"},
		{name: "DEAD_LETTER_TOPIC", value: "events-deduped"}, // equals OUTPUT_TOPIC
		{name: "REPARTITION_TOPIC", value: "events"},         // equals INPUT_TOPIC
		{name: "REPARTITION_PARTITIONS", value: "0", env: testkit.Env{"REPARTITION_TOPIC": "events-by-id"}},
		{name: "REPARTITION_HOPS", value: "hop1", env: testkit.Env{"REPARTITION_TOPIC": "events-by-id"}},
		{name: "DROPPED_TOPIC", value: "bad topic"},
		{name: "DROPPED_SAMPLE_RATE", value: "0"},
		{name: "KAFKA_CLIENT_ID", value: "dedup stage"},
		{name: "KAFKA_SESSION_TIMEOUT", value: "0s"},
		{name: "KAFKA_GROUP_BALANCER", value: "cooperative-sticky"},
		{name: "KAFKA_TLS_ENABLED", value: "maybe"},
		{name: "KAFKA_TLS_CA_FILE", value: missing, env: testkit.Env{"KAFKA_BROKERS": "k:9092", "KAFKA_TLS_ENABLED": "true"}},
		{name: "KAFKA_TLS_CERT_FILE", value: missing, env: testkit.Env{"KAFKA_BROKERS": "k:9092", "KAFKA_TLS_ENABLED": "true", "KAFKA_TLS_KEY_FILE": file}},
		{name: "KAFKA_TLS_KEY_FILE", value: missing, env: testkit.Env{"KAFKA_BROKERS": "k:9092", "KAFKA_TLS_ENABLED": "true", "KAFKA_TLS_CERT_FILE": file}},
		{name: "KAFKA_TLS_INSECURE_SKIP_VERIFY", value: "sure"},
		{name: "KAFKA_SASL_MECHANISM", value: "GSSAPI", env: testkit.Env{"KAFKA_SASL_USERNAME": "u", "KAFKA_SASL_PASSWORD": "p"}},
		{name: "KAFKA_SASL_USERNAME", value: "", env: testkit.Env{"KAFKA_SASL_MECHANISM": "PLAIN", "KAFKA_SASL_PASSWORD": "p"}},
		{name: "KAFKA_SASL_PASSWORD", value: "", env: testkit.Env{"KAFKA_SASL_MECHANISM": "SCRAM-SHA-512", "KAFKA_SASL_USERNAME": "u"}},
		{name: "DEDUP_KEY", value: "nonsense"},
		{name: "DEDUP_MODE", value: "fuzzy"},
		{name: "DEDUP_WINDOW", value: "-1h"},
		{name: "DEDUP_EXPECTED_KEYS", value: "0"},
		{name: "DEDUP_FP_RATE", value: "1"},
		{name: "DEDUP_RETRACT_HEADER", value: " "},
		{name: "DEDUP_MAX_CLOCK_SKEW", value: "0s"},
		{name: "PRODUCE_BATCH_SIZE", value: "0"},
		{name: "PRODUCE_BATCH_BYTES", value: "-5"},
		{name: "PRODUCE_BATCH_TIMEOUT", value: "0s"},
		{name: "PRODUCE_COMPRESSION", value: "brotli"},
		{name: "FETCH_MIN_BYTES", value: "0"},
		{name: "FETCH_MAX_BYTES", value: "lots"},
		{name: "FETCH_BUFFER_BYTES", value: "0"},
		{name: "FETCH_MAX_WAIT", value: "-1s"},
		{name: "CHECKPOINT_STORE", value: "s3"},
		{name: "CHECKPOINT_TOPIC", value: "bad topic", env: testkit.Env{"CHECKPOINT_STORE": "kafka"}},
		{name: "CHECKPOINT_DIR", value: file},
		{name: "CHECKPOINT_INTERVAL", value: "10"}, // a bare number is not a Go duration
		{name: "CHECKPOINT_CHAIN_RATIO", value: "-1"},
		{name: "CHECKPOINT_KEEP", value: "0"},
		{name: "CHECKPOINT_ON_DAMAGE", value: "skip"},
		{name: "METRICS_ADDR", value: "9464"},
		{name: "PROBE_ADDR", value: "127.0.0.1:9465", env: testkit.Env{"METRICS_ADDR": "127.0.0.1:9465"}},
		{name: "DATA_DIR", value: file},
		{name: "LOG_LEVEL", value: "loud"},
		{name: "LOG_FORMAT", value: "xml"},
		{name: "SHUTDOWN_TIMEOUT", value: "0s"},
		{name: "PRODUCE_RECOVERY_TIMEOUT", value: "-1m"},
		{name: "SCHEMA_REGISTRY_URL", value: "registry:8081"}, // no scheme
		{name: "SCHEMA_REGISTRY_USERNAME", value: "", env: testkit.Env{"SCHEMA_REGISTRY_PASSWORD": "p"}},
		{name: "SCHEMA_REGISTRY_PASSWORD", value: "", env: testkit.Env{"SCHEMA_REGISTRY_USERNAME": "u"}},
		{name: "SCHEMA_REGISTRY_TIMEOUT", value: "0s"},
		{name: "SCHEMA_REGISTRY_CACHE_BYTES", value: "1k"},
		{name: "SCHEMA_REGISTRY_SUBJECT", value: " events-value"},
		{name: "SCHEMA_REGISTRY_TLS_CA_FILE", value: missing},
		{name: "SCHEMA_REGISTRY_TLS_CERT_FILE", value: missing, env: testkit.Env{"SCHEMA_REGISTRY_TLS_KEY_FILE": file}},
		{name: "SCHEMA_REGISTRY_TLS_KEY_FILE", value: missing, env: testkit.Env{"SCHEMA_REGISTRY_TLS_CERT_FILE": file}},
		{name: "SCHEMA_REGISTRY_TLS_INSECURE_SKIP_VERIFY", value: "sure"},
	}
}

func TestConfigBadValueNamesVariable(t *testing.T) {
	cases := badValues(t)
	var covered []string
	for _, c := range cases {
		covered = append(covered, c.name)
	}
	slices.Sort(covered)
	want := slices.Sorted(slices.Values(VarNames()))
	if !slices.Equal(covered, want) {
		t.Fatalf("the table must cover every variable of Config exactly once:\n got %q\nwant %q", covered, want)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := testkit.Env{c.name: c.value}
			for k, v := range c.env {
				env[k] = v
			}
			_, err := Load(env.Lookup)
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("%s=%q: want a *Error, got %v", c.name, c.value, err)
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
	env := testkit.Env{
		"DEDUP_WINDOW":         "soon",       // parse error
		"FETCH_MAX_BYTES":      "many",       // parse error
		"DEDUP_FP_RATE":        "1.5",        // out of range
		"KAFKA_START_OFFSET":   "yesterday",  // not in the set
		"DEDUP_KEY":            "header:",    // no header name
		"LOG_FORMAT":           "yaml",       // unknown
		"OUTPUT_TOPIC":         "events",     // same as input
		"CHECKPOINT_STORE":     "filesystem", // unknown
		"DEDUP_MAX_CLOCK_SKEW": "-5m",        // not positive
		"KAFKA_GROUP_BALANCER": "random",     // unknown
	}
	_, err := Load(env.Lookup)
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("want *Error, got %v", err)
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

func TestConfigDocsComplete(t *testing.T) {
	docs := Docs()
	if len(docs) != len(VarNames()) || len(docs) == 0 {
		t.Fatalf("configDocs has %d entries for %d variables", len(docs), len(VarNames()))
	}
	for _, d := range docs {
		if d.Meaning == "" || d.Default == "" {
			t.Errorf("%s: the struct tags must give a help text and a default (envDefault or helpDefault)", d.Name)
		}
	}
	// Every literal default is a value the variable accepts: setting each
	// variable to its own default changes nothing.
	want, err := Load(testkit.Env{}.Lookup)
	if err != nil {
		t.Fatal(err)
	}
	env := testkit.Env{}
	for _, d := range docs {
		if d.Literal {
			env[d.Name] = d.Default
		}
	}
	got, err := Load(env.Lookup)
	if err != nil {
		t.Fatalf("the defaults, set explicitly: %v", err)
	}
	if got != want {
		t.Errorf("explicit defaults give %+v, want %+v", got, want)
	}
}

func TestConfigNumberSuffixes(t *testing.T) {
	cfg, err := Load(testkit.Env{
		"DEDUP_EXPECTED_KEYS": "10M",
		"FETCH_MAX_BYTES":     "20m",
		"PRODUCE_BATCH_BYTES": "1.5k",
		"PRODUCE_BATCH_SIZE":  "2_000",
		"CHECKPOINT_KEEP":     "5",
	}.Lookup)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ExpectedKeys != 10_000_000 || cfg.FetchMaxBytes != 20_000_000 || cfg.ProduceBatchBytes != 1500 ||
		cfg.ProduceBatchSize != 2000 || cfg.CheckpointKeep != 5 {
		t.Errorf("got keys %d, fetch max %d, batch bytes %d, batch size %d, keep %d",
			cfg.ExpectedKeys, cfg.FetchMaxBytes, cfg.ProduceBatchBytes, cfg.ProduceBatchSize, cfg.CheckpointKeep)
	}
	wantRefused(t, false, setting{"DEDUP_EXPECTED_KEYS", "1.5"}, setting{"FETCH_MAX_BYTES", "10MB"},
		setting{"PRODUCE_BATCH_SIZE", "99999999999999G"}, setting{"CHECKPOINT_KEEP", "-1k"})
}

func TestConfigEnumerationsCaseInsensitive(t *testing.T) {
	cfg, err := Load(testkit.Env{
		"KAFKA_BROKERS":        "k:9092",
		"KAFKA_START_OFFSET":   "Earliest",
		"DEDUP_MODE":           "PLAIN",
		"CHECKPOINT_STORE":     "File",
		"LOG_LEVEL":            "WARN",
		"LOG_FORMAT":           "JSON",
		"DEDUP_KEY":            "Header:Trace-ID",
		"KAFKA_SASL_MECHANISM": "scram-sha-256",
		"KAFKA_SASL_USERNAME":  "u",
		"KAFKA_SASL_PASSWORD":  "p",
	}.Lookup)
	if err != nil {
		t.Fatal(err)
	}
	got := []string{cfg.StartOffset, cfg.Mode, cfg.CheckpointStore, cfg.LogLevel, cfg.LogFormat, cfg.Key, cfg.SASLMechanism}
	want := []string{"earliest", "plain", "file", "warn", "json", "header:Trace-ID", "SCRAM-SHA-256"}
	if !slices.Equal(got, want) {
		t.Errorf("normalised to %q, want %q", got, want)
	}
}

// TestConfigFilterLimitsAreRotations checks that the ranges reported by
// variable are the ones rotation (and so the processor and the snapshot
// format) would refuse later.
func TestConfigFilterLimitsAreRotations(t *testing.T) {
	_, err := rotation.New(rotation.Options{ExpectedKeys: rotation.MaxExpectedKeys + 1, FPRate: 0.01, Window: time.Hour})
	if err == nil || !strings.Contains(err.Error(), fmt.Sprint(uint64(rotation.MaxExpectedKeys))) {
		t.Errorf("rotation's limit on expected keys is not %d: %v", uint64(rotation.MaxExpectedKeys), err)
	}
	wantRefused(t, true,
		setting{"DEDUP_EXPECTED_KEYS", "100000000000"},
		setting{"DEDUP_EXPECTED_KEYS", fmt.Sprint(uint64(rotation.MaxExpectedKeys) + 1)},
		setting{"DEDUP_FP_RATE", "0.7"},
		setting{"DEDUP_FP_RATE", "1e-10"},
		setting{"DEDUP_FP_RATE", "NaN"},
		setting{"DEDUP_WINDOW", "400000h"},
	)
	// Inside rotation's range.
	wantAccepted(t,
		setting{"DEDUP_EXPECTED_KEYS", fmt.Sprint(uint64(rotation.MaxExpectedKeys))},
		setting{"DEDUP_FP_RATE", "1e-9"},
		setting{"DEDUP_FP_RATE", "0.5"},
		setting{"DEDUP_WINDOW", "300000h"},
	)
}

// setting is one variable set to one value.
type setting struct{ name, value string }

// wantRefused loads each setting alone and wants a problem naming its
// variable: with only, that one problem and no other.
func wantRefused(t *testing.T, only bool, cases ...setting) {
	t.Helper()
	for _, c := range cases {
		_, err := Load(testkit.Env{c.name: c.value}.Lookup)
		var ce *Error
		named := errors.As(err, &ce) && slices.ContainsFunc(ce.Problems, func(p Problem) bool { return p.Var == c.name })
		if !named || only && len(ce.Problems) != 1 {
			t.Errorf("%s=%q: want a problem naming %s (the only one: %v), got %v", c.name, c.value, c.name, only, err)
		}
	}
}

// wantAccepted loads each setting alone and wants no problem.
func wantAccepted(t *testing.T, cases ...setting) {
	t.Helper()
	for _, c := range cases {
		if _, err := Load(testkit.Env{c.name: c.value}.Lookup); err != nil {
			t.Errorf("%s=%q: %v", c.name, c.value, err)
		}
	}
}

func TestConfigAddresses(t *testing.T) {
	wantRefused(t, false,
		setting{"METRICS_ADDR", ":99999"},
		setting{"METRICS_ADDR", "bad host!:9464"},
		setting{"METRICS_ADDR", "localhost:http"},
		setting{"PROBE_ADDR", ":99999"},
		setting{"EMBEDDED_BROKER_ADDR", ":99999"},
		setting{"EMBEDDED_BROKER_ADDR", "-x-:9092"},
		setting{"KAFKA_BROKERS", "k1:9092,k2:70000"},
	)
	wantAccepted(t,
		setting{"METRICS_ADDR", ":0"},
		setting{"METRICS_ADDR", "[::1]:9464"},
		setting{"METRICS_ADDR", "metrics.internal:9464"},
		setting{"PROBE_ADDR", "127.0.0.1:9465"},
		setting{"EMBEDDED_BROKER_ADDR", "0.0.0.0:9092"},
	)
}

// TestRunRefusesBeforeStarting checks that what the processor or a
// listener would refuse later stops the binary with exit 2, all problems
// named at once, before the embedded broker starts.

// TestConfigRepartitionHops: REPARTITION_HOPS takes both, rekey or dedup
// with REPARTITION_TOPIC (both when unset) and says which hops run; set
// without REPARTITION_TOPIC, or to another value, it is an error naming
// it, reported with every other problem at once.
func TestConfigRepartitionHops(t *testing.T) {
	for _, c := range []struct {
		hops          string
		rekey, dedupe bool
	}{{"", true, true}, {"both", true, true}, {"rekey", true, false}, {"dedup", false, true}} {
		cfg, err := Load(testkit.Env{"REPARTITION_TOPIC": "events-by-id", "REPARTITION_HOPS": c.hops}.Lookup)
		if err != nil {
			t.Fatalf("REPARTITION_HOPS=%q: %v", c.hops, err)
		}
		if cfg.RunsRekey() != c.rekey || cfg.RunsDedup() != c.dedupe {
			t.Errorf("REPARTITION_HOPS=%q: RunsRekey %v, RunsDedup %v; want %v, %v", c.hops, cfg.RunsRekey(), cfg.RunsDedup(), c.rekey, c.dedupe)
		}
	}
	cfg, err := Load(testkit.Env{}.Lookup)
	if err != nil || cfg.RunsRekey() || !cfg.RunsDedup() {
		t.Errorf("one hop: RunsRekey %v, RunsDedup %v (%v); want false, true", cfg.RunsRekey(), cfg.RunsDedup(), err)
	}
	for _, env := range []testkit.Env{
		{"REPARTITION_HOPS": "rekey"},
		{"REPARTITION_HOPS": "both"},
		{"REPARTITION_HOPS": "Rekey", "REPARTITION_TOPIC": "events-by-id"},
		{"REPARTITION_HOPS": "hop2", "REPARTITION_TOPIC": "events-by-id"},
	} {
		env["DEDUP_WINDOW"] = "-1h" // a second problem, reported too
		_, err := Load(env.Lookup)
		var ce *Error
		if !errors.As(err, &ce) {
			t.Fatalf("%v: want a *Error, got %v", env, err)
		}
		var names []string
		for _, p := range ce.Problems {
			names = append(names, p.Var)
		}
		if !slices.Contains(names, "REPARTITION_HOPS") || !slices.Contains(names, "DEDUP_WINDOW") {
			t.Errorf("%v: problems %v, want REPARTITION_HOPS and DEDUP_WINDOW", env, ce.Problems)
		}
	}
}

// TestSchemaKeyNeedsRegistry: a schema-framed DEDUP_KEY without
// SCHEMA_REGISTRY_URL is a configuration error naming the registry
// variable; composite keys normalise each part's kind.
func TestSchemaKeyNeedsRegistry(t *testing.T) {
	_, err := Load(testkit.Env{"DEDUP_KEY": "header:tenant,avro:id"}.Lookup)
	var ce *Error
	if !errors.As(err, &ce) || len(ce.Problems) != 1 || ce.Problems[0].Var != "SCHEMA_REGISTRY_URL" {
		t.Fatalf("Load = %v, want one problem naming SCHEMA_REGISTRY_URL", err)
	}
	cfg, err := Load(testkit.Env{"DEDUP_KEY": "Header:Tenant, AVRO:id", "SCHEMA_REGISTRY_URL": "http://a:8081, https://b:8081"}.Lookup)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Key != "header:Tenant,avro:id" || len(cfg.RegistryURLs()) != 2 || cfg.RegistrySubject != "events-value" {
		t.Errorf("key %q, urls %q, subject %q", cfg.Key, cfg.RegistryURLs(), cfg.RegistrySubject)
	}
}

// TestConfigDroppedTopic: DROPPED_TOPIC must differ from every other topic
// the stage reads or writes, the checkpoint topic of the Kafka store
// included, and DROPPED_SAMPLE_RATE lie in (0, 1]; the embedded broker
// creates the drop topic.
func TestConfigDroppedTopic(t *testing.T) {
	for _, other := range []testkit.Env{
		{"INPUT_TOPIC": "same"}, {"OUTPUT_TOPIC": "same"}, {"DEAD_LETTER_TOPIC": "same"}, {"REPARTITION_TOPIC": "same"},
		{"CHECKPOINT_STORE": "kafka", "CHECKPOINT_TOPIC": "same"},
	} {
		env := testkit.Env{"DROPPED_TOPIC": "same"}
		for k, v := range other {
			env[k] = v
		}
		_, err := Load(env.Lookup)
		var ce *Error
		if !errors.As(err, &ce) || !slices.ContainsFunc(ce.Problems, func(p Problem) bool { return p.Var == "DROPPED_TOPIC" }) {
			t.Errorf("DROPPED_TOPIC equal to %v: got %v, want a problem naming DROPPED_TOPIC", other, err)
		}
	}
	for _, rate := range []string{"-0.1", "1.5", "NaN"} {
		if _, err := Load(testkit.Env{"DROPPED_TOPIC": "drops", "DROPPED_SAMPLE_RATE": rate}.Lookup); err == nil || !strings.Contains(err.Error(), "DROPPED_SAMPLE_RATE") {
			t.Errorf("DROPPED_SAMPLE_RATE=%s: got %v, want a problem naming it", rate, err)
		}
	}
	c, err := Load(testkit.Env{"DROPPED_TOPIC": "drops", "DROPPED_SAMPLE_RATE": "0.25"}.Lookup)
	if err != nil {
		t.Fatal(err)
	}
	if c.DroppedSampleRate != 0.25 || !slices.Contains(c.EmbeddedTopics(), "drops") {
		t.Errorf("sample rate %v, embedded topics %v: want 0.25 and the drop topic among them", c.DroppedSampleRate, c.EmbeddedTopics())
	}
}
