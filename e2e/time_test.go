package e2e_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestClockSkewAndKeptTimestamps drives the binary with records stamped far
// ahead of the wall clock in the middle of duplicates, records without a
// timestamp, and an honest jump of several windows. Records ahead of the
// clock by more than DEDUP_MAX_CLOCK_SKEW do not move event time (the
// duplicates after them are dropped), the honest jump rotates the filters,
// every forwarded record keeps its timestamp (one read without a timestamp
// is written as -1), and /metrics counts each kind.
func TestClockSkewAndKeptTimestamps(t *testing.T) {
	_, brokers := newCluster(t)
	topics := namesOf(t)
	// A broker may refuse records stamped far ahead of its clock; this
	// test produces and forwards some on purpose.
	allowFutureTimestamps(t, brokers, topics.input, topics.output)
	obs := startObserver(t, brokers)
	env := stageEnv(t, brokers, "file")
	env["DEDUP_WINDOW"] = "1m"
	env["DEDUP_MAX_CLOCK_SKEW"] = "30s"
	p := startProc(t, "dedup", env)
	waitReady(t, p, 30*time.Second)

	cl, err := kgo.NewClient(seedBrokers(brokers), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.DefaultProduceTopic(topics.input))
	if err != nil {
		t.Fatalf("create producer: %v", err)
	}
	defer cl.Close()
	var in []*kgo.Record
	add := func(key, value string, ts time.Time) {
		in = append(in, &kgo.Record{Partition: 0, Key: []byte(key), Value: []byte(value), Timestamp: ts})
	}
	const n = 100
	keys := func(tag string, ts time.Time) {
		for i := range n {
			add(fmt.Sprintf("k%d", i), fmt.Sprintf("%s-%d", tag, i), ts.Add(time.Duration(i)*time.Millisecond))
		}
	}
	now := time.Now().Truncate(time.Millisecond)
	base := now.Truncate(time.Minute).Add(-5 * time.Minute) // five windows ago
	yearAhead := now.AddDate(1, 0, 0)
	keys("first", base)
	add("bad-1", "year-ahead", yearAhead)
	keys("dup-a", base.Add(10*time.Second))
	add("bad-2", "ten-minutes-ahead", now.Add(10*time.Minute))
	keys("dup-b", base.Add(20*time.Second))
	add("k0", "zero-timestamp", time.UnixMilli(0))
	add("neg", "minus-one-timestamp", time.UnixMilli(-1))
	add("one", "one-ms-timestamp", time.UnixMilli(1))
	add("k0", "five-windows-later", now) // honest: clears both generations
	add("k0", "dup-of-that", now)        // same millisecond: no boundary between them
	for part := range int32(numPartitions) {
		in = append(in, &kgo.Record{Partition: part, Key: []byte(fmt.Sprintf("%s%d", sentinelPrefix, part)),
			Value: []byte("sentinel"), Timestamp: now})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, in...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	obs.waitSentinels(t, 60*time.Second, func() error { return alive(p) })
	out := obs.drain(t, brokers)

	var got []string
	stamps := map[string]int64{}
	for _, o := range out {
		if o.headers[hdrSourcePartition] != "0" || o.value == "sentinel" {
			continue
		}
		got = append(got, o.value)
		stamps[o.value] = o.ts.UnixMilli()
	}
	var want []string
	for i := range n {
		want = append(want, fmt.Sprintf("first-%d", i))
	}
	want = append(want, "year-ahead", "ten-minutes-ahead", "minus-one-timestamp", "one-ms-timestamp", "five-windows-later")
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("outputs of input partition 0\n got %q\nwant %q", got, want)
	}
	for value, ms := range map[string]int64{
		"first-0":             base.UnixMilli(),
		"year-ahead":          yearAhead.UnixMilli(),
		"ten-minutes-ahead":   now.Add(10 * time.Minute).UnixMilli(),
		"minus-one-timestamp": -1,
		"one-ms-timestamp":    1,
		"five-windows-later":  now.UnixMilli(),
	} {
		if stamps[value] != ms {
			t.Errorf("%s: output timestamp %d, want %d", value, stamps[value], ms)
		}
	}

	part0 := func(samples []sample, name string, labels ...string) float64 {
		m := map[string]string{"topic": topics.input, "partition": "0"}
		for i := 0; i+1 < len(labels); i += 2 {
			m[labels[i]] = labels[i+1]
		}
		v, _ := sum(samples, name, m)
		return v
	}
	want0 := map[string]float64{"future": 2, "missing": 2, "rewritten": 1, "rotations": 1}
	waitFor(t, 20*time.Second, fmt.Sprintf("/metrics of partition 0 to show %v", want0), func() error {
		if err := alive(p); err != nil {
			return err
		}
		samples, err := scrape(p, 2*time.Second)
		if err != nil {
			return fmt.Errorf("%w: %v", errNotYet, err)
		}
		have := map[string]float64{
			"future":    part0(samples, "dedup_timestamp_anomalies_total", "kind", "future"),
			"missing":   part0(samples, "dedup_timestamp_anomalies_total", "kind", "missing"),
			"rewritten": part0(samples, "dedup_timestamp_rewritten_total"),
			"rotations": part0(samples, "dedup_rotations_total"),
		}
		for k, v := range want0 {
			if have[k] != v {
				return fmt.Errorf("%w: have %v", errNotYet, have)
			}
		}
		if d := part0(samples, "dedup_messages_total", "outcome", "duplicate"); d != 2*n+2 {
			return fmt.Errorf("%w: %v duplicates, want %d", errNotYet, d, 2*n+2)
		}
		return nil
	})
	p.termOK(t)
}
