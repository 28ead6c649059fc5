// Command rolling measures a rolling restart of a three-member group of
// dedup processes against an in-process kfake broker: every member in turn
// gets SIGTERM and is started again once it has exited. It reports, over
// the whole roll, the partitions restored from the checkpoint store and
// from memory, the output records the restores' replay scans read, the
// time spent in those scans (from the members' logs), and each restarted
// member's time from start to /readyz 200.
//
//	go build -o /tmp/dedup-after ./cmd/dedup
//	go run ./bench/rolling -binary before=/tmp/dedup-before -binary after=/tmp/dedup-after
//
// Each binary gets its own group, output topic and checkpoint topic over
// one preloaded input topic, and first deduplicates all of it, so that the
// output holds its whole history when the roll starts.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"dedup/offsets"
)

const (
	inputTopic = "events"
	members    = 3
)

type binaries []string

func (b *binaries) String() string     { return strings.Join(*b, ",") }
func (b *binaries) Set(v string) error { *b = append(*b, v); return nil }

func main() {
	var bins binaries
	flag.Var(&bins, "binary", "name=path of a dedup binary (repeat)")
	records := flag.Int("records", 3_000_000, "input records (about 60% first occurrences)")
	partitions := flag.Int("partitions", 12, "partitions of the input and output topics")
	flag.Parse()
	if err := run(bins, *records, *partitions); err != nil {
		fmt.Fprintln(os.Stderr, "rolling:", err)
		os.Exit(1)
	}
}

func run(bins binaries, records, partitions int) error {
	if len(bins) == 0 {
		return errors.New("no -binary given")
	}
	var outputs []string
	for _, b := range bins {
		name, _, _ := strings.Cut(b, "=")
		outputs = append(outputs, "out-"+name)
	}
	c, err := kfake.NewCluster(
		kfake.NumBrokers(1),
		kfake.SeedTopics(int32(partitions), append([]string{inputTopic}, outputs...)...),
		kfake.GroupMinSessionTimeout(100*time.Millisecond),
	)
	if err != nil {
		return fmt.Errorf("start kfake: %w", err)
	}
	defer c.Close()
	brokers := c.ListenAddrs()[0]
	began := time.Now()
	if err := preload(brokers, records, partitions); err != nil {
		return err
	}
	fmt.Printf("preloaded %d records over %d partitions in %s\n", records, partitions, time.Since(began).Round(time.Millisecond))
	dir, err := os.MkdirTemp("", "dedup-rolling-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	for i, b := range bins {
		name, path, ok := strings.Cut(b, "=")
		if !ok {
			return fmt.Errorf("-binary %q: want name=path", b)
		}
		r, err := roll(filepath.Join(dir, name), path, brokers, outputs[i], name, records, partitions)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		fmt.Printf("%s: output %d records; roll: %v partitions restored from the store, %v from memory, %v empty; "+
			"%s output records scanned; %s in replay scans; /readyz after start: %s\n",
			name, r.output, r.store, r.memory, r.empty, r.scanned, r.scanTime.Round(time.Millisecond), r.ready)
	}
	return nil
}

// preload writes records keyed so that about 60% are first occurrences.
func preload(brokers string, records, partitions int) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers), kgo.DefaultProduceTopic(inputTopic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedRecords(100000))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx := context.Background()
	base := time.Now().Add(-time.Hour)
	var (
		mu   sync.Mutex
		perr error
	)
	for i := range records {
		k := i
		if i%5 >= 3 { // 40% repeat a recent key
			k = max(0, i-1-(i*7919)%5000)
		}
		key := "k" + strconv.Itoa(k-k%5+min(k%5, 2))
		r := &kgo.Record{Key: []byte(key), Value: []byte("v" + strconv.Itoa(i)), Timestamp: base.Add(time.Duration(i) * time.Microsecond),
			Partition: int32(fnv(key) % uint32(partitions))}
		cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil && perr == nil {
				perr = err
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	mu.Lock()
	defer mu.Unlock()
	return perr
}

func fnv(s string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= 16777619
	}
	return h
}

type result struct {
	output               int64
	store, memory, empty float64
	scanned              string
	scanTime             time.Duration
	ready                []time.Duration
}

type member struct {
	name    string
	env     []string
	metrics string
	log     string
	cmd     *exec.Cmd
	done    chan struct{}
	base    map[string]float64 // counters when the roll started (first incarnation)
}

func freeAddr() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func (m *member) start(path string, n int) error {
	m.metrics = freeAddr()
	m.log = filepath.Join(filepath.Dir(m.log), fmt.Sprintf("%s.%d.log", m.name, n))
	f, err := os.Create(m.log)
	if err != nil {
		return err
	}
	m.cmd = exec.Command(path)
	m.cmd.Env = append(append([]string{}, m.env...), "METRICS_ADDR="+m.metrics)
	m.cmd.Stdout, m.cmd.Stderr = f, f
	if err := m.cmd.Start(); err != nil {
		return err
	}
	m.done = make(chan struct{})
	go func() { _ = m.cmd.Wait(); f.Close(); close(m.done) }()
	return nil
}

func waitUntil(d time.Duration, what string, cond func() bool) error {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

func get(addr, path string) (int, string) {
	cl := &http.Client{Timeout: 2 * time.Second}
	resp, err := cl.Get("http://" + addr + path)
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// counters scrapes the families the roll reports, summed over labels, with
// dedup_restores_total split by source.
func counters(addr string) map[string]float64 {
	_, body := get(addr, "/metrics")
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		name, rest, _ := strings.Cut(line, " ")
		if i := strings.IndexByte(line, '{'); i >= 0 {
			j := strings.LastIndexByte(line, '}')
			name, rest = line[:i], strings.TrimSpace(line[j+1:])
			if name == "dedup_restores_total" {
				_, src, _ := strings.Cut(line[i:j], `source="`)
				src, _, _ = strings.Cut(src, `"`)
				name += "/" + src
			}
		}
		v, err := strconv.ParseFloat(strings.Fields(rest + " 0")[0], 64)
		if err == nil {
			out[name] += v
		}
	}
	return out
}

func roll(dir, path, brokers, output, group string, records, partitions int) (result, error) {
	var res result
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return res, err
	}
	ms := make([]*member, members)
	for i := range ms {
		ms[i] = &member{name: fmt.Sprintf("m%d", i), log: filepath.Join(dir, "m.log"), env: []string{
			"KAFKA_BROKERS=" + brokers, "INPUT_TOPIC=" + inputTopic, "OUTPUT_TOPIC=" + output, "GROUP_ID=" + group,
			"CHECKPOINT_STORE=kafka", "CHECKPOINT_INTERVAL=5s", "KAFKA_SESSION_TIMEOUT=6s", "SHUTDOWN_TIMEOUT=60s",
			"DATA_DIR=" + filepath.Join(dir, fmt.Sprintf("m%d", i)), "DEDUP_EXPECTED_KEYS=" + strconv.Itoa(records/partitions),
			"DEDUP_WINDOW=24h", "LOG_FORMAT=json", "PATH=" + os.Getenv("PATH"),
		}}
		if err := ms[i].start(path, 0); err != nil {
			return res, err
		}
	}
	defer func() {
		for _, m := range ms {
			if m.cmd.ProcessState == nil {
				_ = m.cmd.Process.Kill()
				<-m.done
			}
		}
	}()
	// Every partition owned, every member ready. (Not the lag gauges: a
	// revoked partition's series may linger with its last value.)
	settled := func() bool {
		var assigned float64
		for _, m := range ms {
			if code, _ := get(m.metrics, "/readyz"); code != 200 {
				return false
			}
			assigned += counters(m.metrics)["dedup_assigned_partitions"]
		}
		return assigned == float64(partitions)
	}
	if err := waitUntil(30*time.Minute, "the history deduplicated", func() bool {
		if !settled() {
			return false
		}
		var n float64
		for _, m := range ms {
			n += counters(m.metrics)["dedup_messages_total"]
		}
		return n >= float64(records)
	}); err != nil {
		return res, err
	}
	// Past the periodic checkpoints of the catch-up: the roll starts from a
	// steady state.
	time.Sleep(6 * time.Second)
	for _, m := range ms {
		m.base = counters(m.metrics)
	}
	rollStart := time.Now()
	total := map[string]float64{}
	add := func(m *member) {
		c := counters(m.metrics)
		for k, v := range c {
			total[k] += v - m.base[k]
		}
	}
	for i, m := range ms {
		add(m)
		if err := m.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			return res, err
		}
		<-m.done
		started := time.Now()
		if err := m.start(path, 1); err != nil {
			return res, err
		}
		m.base = map[string]float64{}
		if err := waitUntil(5*time.Minute, fmt.Sprintf("member %d /readyz", i), func() bool {
			code, _ := get(m.metrics, "/readyz")
			return code == 200
		}); err != nil {
			return res, err
		}
		res.ready = append(res.ready, time.Since(started).Round(time.Millisecond))
		if err := waitUntil(5*time.Minute, "the group to settle", settled); err != nil {
			return res, err
		}
	}
	for _, m := range ms {
		add(m)
	}
	for _, m := range ms {
		_ = m.cmd.Process.Signal(syscall.SIGTERM)
		<-m.done
	}
	res.store = total["dedup_restores_total/latest"] + total["dedup_restores_total/fallback"]
	res.memory = total["dedup_restores_total/memory"]
	res.empty = total["dedup_restores_total/empty"]
	res.scanned = "n/a (no metric)"
	if _, ok := total["dedup_restore_scanned_records_total"]; ok {
		res.scanned = strconv.FormatFloat(total["dedup_restore_scanned_records_total"], 'f', 0, 64)
	}
	logs, _ := filepath.Glob(filepath.Join(dir, "m*.*.log"))
	for _, l := range logs {
		res.scanTime += scanTime(l, rollStart)
	}
	end, err := outputEnd(brokers, output, partitions)
	res.output = end
	return res, err
}

// scanTime sums the replay-scan durations a member's log reports for
// restores after since.
func scanTime(path string, since time.Time) time.Duration {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	var total time.Duration
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		var l struct {
			Time time.Time `json:"time"`
			Msg  string    `json:"msg"`
			Scan float64   `json:"scan"`
		}
		if json.Unmarshal(sc.Bytes(), &l) == nil && l.Msg == "checkpoint restored" && l.Time.After(since) {
			total += time.Duration(l.Scan)
		}
	}
	return total
}

func outputEnd(brokers, topic string, partitions int) (int64, error) {
	parts := make([]int, partitions)
	for i := range parts {
		parts[i] = i
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// A transport of its own, closed on return: kafka.DefaultTransport's
	// pools would go on dialing the broker after it is gone.
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	r, err := offsets.List(ctx, &kafka.Client{Addr: kafka.TCP(brokers), Transport: tr}, topic, parts)
	var n int64
	for _, o := range r {
		n += o.End
	}
	return n, err
}
