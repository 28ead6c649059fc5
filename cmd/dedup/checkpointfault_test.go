package main

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"dedup/internal/kfaketest"
	"dedup/internal/testkit"
)

// The checkpoint store failing under a running stage (docs/faults.md,
// "Checkpoint store unwritable or full"): the first failed save is logged
// and counted within about one CHECKPOINT_INTERVAL, once per partition
// while it lasts; /readyz and /healthz stay 200; records are still
// forwarded; offsets are not committed; and once the store takes writes
// again the checkpoints and commits resume, with every first occurrence in
// the output exactly once.

// outageInterval is CHECKPOINT_INTERVAL in these tests.
const outageInterval = 2 * time.Second

// storeFault makes the checkpoint store refuse writes (start) and take
// them again (end).
type storeFault struct {
	env        testkit.Env
	start, end func(t *testing.T)
}

// producedKeys returns the record keys of req's batches for topic. The
// checkpoint writer does not compress.
func producedKeys(req *kmsg.ProduceRequest, topic string) []string {
	var keys []string
	for _, rt := range req.Topics {
		if rt.Topic != topic {
			continue
		}
		for _, rp := range rt.Partitions {
			src := rp.Records
			for len(src) > 0 {
				var b kmsg.RecordBatch
				if err := b.ReadFrom(src); err != nil {
					break
				}
				src = src[min(len(src), 12+int(b.Length)):] // base offset and length precede Length's count
				recs := b.Records
				for range b.NumRecords {
					var r kmsg.Record
					if err := r.ReadFrom(recs); err != nil {
						break
					}
					keys = append(keys, string(r.Key))
					recs = recs[min(len(recs), varintLen(int64(r.Length))+int(r.Length)):]
				}
			}
		}
	}
	return keys
}

// varintLen is the length of v as a zigzag varint.
func varintLen(v int64) int {
	u := uint64(v<<1) ^ uint64(v>>63)
	n := 1
	for u >= 0x80 {
		u >>= 7
		n++
	}
	return n
}

// manifestKey matches the key of a base's or an increment's manifest, the
// record that makes the piece durable once its chunks are written.
var manifestKey = regexp.MustCompile(`/(m/\d{20}|i/\d{20}/\d{20})$`)

// refuseCheckpointProduces installs a fault on the Kafka store's topic:
// while armed, its Produce requests that carry a record whose key matches
// which (nil: every one) are answered with code.
func refuseCheckpointProduces(c *kfake.Cluster, code int16, which *regexp.Regexp) storeFault {
	const topic = "dedup-dedup-state"
	var armed atomic.Bool
	c.ControlKey(int16(kmsg.Produce), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := r.(*kmsg.ProduceRequest)
		if !armed.Load() || !kfaketest.ProducesTo(req, topic) {
			return nil, nil, false
		}
		if which != nil {
			hit := false
			for _, k := range producedKeys(req, topic) {
				hit = hit || which.MatchString(k)
			}
			if !hit {
				return nil, nil, false
			}
		}
		return kfaketest.ErrorResponse(req, code), nil, true
	})
	return storeFault{
		env:   testkit.Env{"CHECKPOINT_STORE": "kafka"},
		start: func(*testing.T) { armed.Store(true) },
		end:   func(*testing.T) { armed.Store(false) },
	}
}

// partitionDirs are the file store's directories of the input's two
// partitions under DATA_DIR.
func partitionDirs(dataDir string) []string {
	return []string{
		filepath.Join(dataDir, "checkpoints", "dedup", "events", "0"),
		filepath.Join(dataDir, "checkpoints", "dedup", "events", "1"),
	}
}

// TestCheckpointStoreOutage: the Kafka store's topic refusing writes at
// several points of a save (its first chunk with a retriable error, the
// whole save with the broker's storage error, the manifest after the
// chunks landed with a permanent error), and the file store's directories
// made unwritable (chmod 0500; root writes regardless, so that case is
// skipped as root) or replaced by a file (which stops root as well).
func TestCheckpointStoreOutage(t *testing.T) {
	kafkaCases := []struct {
		name  string
		code  int16
		which *regexp.Regexp
	}{
		{"kafka-chunks-not-leader", kerr.NotLeaderForPartition.Code, regexp.MustCompile(`/c/`)},
		{"kafka-storage-error", kerr.KafkaStorageError.Code, nil},
		{"kafka-manifest-unauthorized", kerr.TopicAuthorizationFailed.Code, manifestKey},
	}
	for _, kc := range kafkaCases {
		t.Run(kc.name, func(t *testing.T) {
			cluster := testkit.Cluster(t, 2)
			f := refuseCheckpointProduces(cluster, kc.code, kc.which)
			checkpointOutage(t, cluster, testEnv(t), f)
		})
	}
	t.Run("kafka-topic-deleted", func(t *testing.T) {
		cluster := testkit.Cluster(t, 2)
		const topic = "dedup-dedup-state"
		checkpointOutage(t, cluster, testEnv(t), storeFault{
			env: testkit.Env{"CHECKPOINT_STORE": "kafka"},
			start: func(t *testing.T) {
				if err := cluster.DeleteTopic(topic); err != nil {
					t.Fatal(err)
				}
			},
			end: func(t *testing.T) {
				if err := cluster.CreateTopic(topic, 2, map[string]string{"cleanup.policy": "compact"}); err != nil {
					t.Fatal(err)
				}
			},
		})
	})
	t.Run("file-chmod", func(t *testing.T) {
		if os.Geteuid() == 0 {
			t.Skip("running as root: permission bits do not stop root's writes (file-not-a-directory covers the file store as root)")
		}
		env := testEnv(t)
		dirs := partitionDirs(env["DATA_DIR"])
		checkpointOutage(t, testkit.Cluster(t, 2), env, storeFault{
			env: testkit.Env{"CHECKPOINT_STORE": "file"},
			start: func(t *testing.T) {
				forEachDir(t, dirs, func(d string) error { return os.Chmod(d, 0o500) })
				t.Cleanup(func() {
					for _, d := range dirs {
						_ = os.Chmod(d, 0o755) // so that TempDir's removal works after a failure
					}
				})
			},
			end: func(t *testing.T) {
				forEachDir(t, dirs, func(d string) error { return os.Chmod(d, 0o755) })
			},
		})
	})
	t.Run("file-disk-full", func(t *testing.T) {
		// A file system of its own, filled by the test: the store's
		// writes fail with ENOSPC, as on a full volume.
		dir := filepath.Join(t.TempDir(), "checkpoints")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=16m"); err != nil {
			t.Skipf("cannot mount a tmpfs to fill (%v): mounting needs root", err)
		}
		t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
		env := testEnv(t)
		filler := filepath.Join(dir, "filler")
		checkpointOutage(t, testkit.Cluster(t, 2), env, storeFault{
			env: testkit.Env{"CHECKPOINT_STORE": "file", "CHECKPOINT_DIR": dir},
			start: func(t *testing.T) {
				f, err := os.Create(filler)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				chunk := make([]byte, 64<<10)
				for {
					if _, err := f.Write(chunk); err != nil {
						if !errors.Is(err, syscall.ENOSPC) {
							t.Fatalf("fill the file system: %v, want ENOSPC", err)
						}
						return
					}
				}
			},
			end: func(t *testing.T) {
				if err := os.Remove(filler); err != nil {
					t.Fatal(err)
				}
			},
		})
	})
	t.Run("file-not-a-directory", func(t *testing.T) {
		env := testEnv(t)
		dirs := partitionDirs(env["DATA_DIR"])
		checkpointOutage(t, testkit.Cluster(t, 2), env, storeFault{
			env: testkit.Env{"CHECKPOINT_STORE": "file"},
			start: func(t *testing.T) {
				forEachDir(t, dirs, func(d string) error {
					return errors.Join(os.Rename(d, d+".aside"), os.WriteFile(d, nil, 0o644))
				})
			},
			end: func(t *testing.T) {
				forEachDir(t, dirs, func(d string) error {
					return errors.Join(os.Remove(d), os.Rename(d+".aside", d))
				})
			},
		})
	})
}

// committedSum is the sum of the group's committed offsets on the input.
func committedSum(cluster *kfake.Cluster) int64 {
	g := cluster.GroupInfo("dedup")
	if g == nil {
		return 0
	}
	var sum int64
	for _, c := range g.Commits["events"] {
		sum += c.Offset
	}
	return sum
}

func checkpointOutage(t *testing.T, cluster *kfake.Cluster, env testkit.Env, f storeFault) {
	t.Helper()
	env["KAFKA_BROKERS"] = cluster.ListenAddrs()[0]
	env["LOG_LEVEL"] = "info"
	env["CHECKPOINT_INTERVAL"] = outageInterval.String()
	for k, v := range f.env {
		env[k] = v
	}
	bin := startBinary(t, env)
	metrics := env["METRICS_ADDR"]
	waitReady(t, bin, metrics)
	addr := cluster.ListenAddrs()[0]
	client := []kgo.Opt{kgo.SeedBrokers(addr)}

	const keys = 30
	all := keyedWithDuplicates("events", keys, 2) // copy0 of every key, then copy1
	before, during, after := all[:20], all[20:45], all[45:]
	testkit.Produce(t, client, before...)
	testkit.ConsumeN(t, client, "events-deduped", len(before))
	waitCommitted(t, cluster, int64(len(before)))
	failures, err := testkit.MetricSum(metrics, "dedup_checkpoint_failures_total")
	if err != nil {
		t.Fatal(err)
	}

	logBefore := len(bin.stderr.String())
	f.start(t)
	began := time.Now()
	// New first occurrences and duplicates while the store refuses writes:
	// still decided and forwarded.
	testkit.Produce(t, client, during...)
	produced := time.Now()
	testkit.ConsumeN(t, client, "events-deduped", keys)
	waitLog(t, bin, "checkpoint failed")
	took := time.Since(produced)
	t.Logf("first checkpoint failure logged %v after the input arrived", took.Round(10*time.Millisecond))
	// The next checkpoint is due within an interval and the writer gives
	// up after about a second (kafka-go's default budget took 7.6 s).
	if took > 2*outageInterval+2*time.Second {
		t.Errorf("the first checkpoint failure was logged %v after the input arrived, want within about one CHECKPOINT_INTERVAL (%v)", took, outageInterval)
	}
	testkit.WaitFor(t, "dedup_checkpoint_failures_total to rise", 15*time.Second, func() (bool, error) {
		v, err := testkit.MetricSum(metrics, "dedup_checkpoint_failures_total")
		return v > failures, err
	})
	lastSuccess, err := testkit.MetricSum(metrics, "dedup_checkpoint_last_success_timestamp_seconds")
	if err != nil {
		t.Fatal(err)
	}
	// Several intervals of outage: checkpoints keep failing, commits wait.
	for time.Since(began) < 4*outageInterval {
		time.Sleep(100 * time.Millisecond) // the fault's duration, not synchronisation
	}
	if code, body, err := readyz(metrics); err != nil || code != 200 {
		t.Errorf("/readyz = %d %q, %v during the checkpoint outage; want 200: the stage makes progress", code, body, err)
	}
	checkHealthy(t, metrics)
	if c := committedSum(cluster); c != int64(len(before)) {
		t.Errorf("committed offsets sum to %d during the outage, want %d: commits wait for a checkpoint", c, len(before))
	}
	if v, err := testkit.MetricSum(metrics, "dedup_checkpoint_last_success_timestamp_seconds"); err != nil || v != lastSuccess {
		t.Errorf("last successful checkpoint time moved during the outage (%v -> %v, %v)", lastSuccess, v, err)
	}
	if v, err := testkit.MetricSum(metrics, "dedup_checkpoint_failures_total"); err != nil || v < failures+2 {
		t.Errorf("%v checkpoint failures after %v of outage, want them counted at each interval (%v)", v-failures, time.Since(began).Round(time.Second), err)
	}
	outage := bin.stderr.String()[logBefore:]
	if n := len(logLines(outage, "level=WARN", "checkpoint failed")); n < 1 || n > 2 {
		t.Errorf("%d warnings say a checkpoint failed, want one per partition that had input:\n%s", n, outage)
	}
	if loud := append(logLines(outage, "level=WARN"), logLines(outage, "level=ERROR")...); len(loud) > max(2, int(time.Since(began)/(2*time.Second))) {
		t.Errorf("%d warnings and errors in %v of outage, want about one per 2s at most:\n%s",
			len(loud), time.Since(began).Round(time.Second), strings.Join(loud, "\n"))
	}

	f.end(t)
	testkit.Produce(t, client, after...)
	waitLog(t, bin, "checkpoints succeed again")
	waitCommitted(t, cluster, int64(len(all)))
	if v, err := testkit.MetricSum(metrics, "dedup_checkpoint_last_success_timestamp_seconds"); err != nil || v <= lastSuccess {
		t.Errorf("last successful checkpoint time %v after the outage, want past %v (%v)", v, lastSuccess, err)
	}
	checkExactlyOnce(t, addr, client, keys)
	bin.stopOK(t, "")
	if n := len(logLines(bin.stderr.String(), "level=ERROR")); n > 0 {
		t.Errorf("%d errors logged, want none:\n%s", n, strings.Join(logLines(bin.stderr.String(), "level=ERROR"), "\n"))
	}
}

// forEachDir runs f on every dir and fails the test at the first error.
func forEachDir(t *testing.T, dirs []string, f func(dir string) error) {
	t.Helper()
	for _, d := range dirs {
		if err := f(d); err != nil {
			t.Fatal(err)
		}
	}
}
