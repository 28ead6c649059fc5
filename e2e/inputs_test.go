package e2e_test

import (
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"dedup/internal/testkit"
)

// listWorkload builds a workload from explicit records, in order: value
// "v<index>" (what verify expects), event time base + index ms, each key a
// first occurrence unless it repeats an earlier one.
func listWorkload(base time.Time, keys []string, partitions []int32) *workload {
	w := &workload{}
	seen := map[string]bool{}
	for i, k := range keys {
		w.recs = append(w.recs, inRecord{
			key:       k,
			value:     fmt.Sprintf("v%d", i),
			ts:        base.Add(time.Duration(i) * time.Millisecond),
			partition: partitions[i],
			offset:    -1,
			first:     !seen[k],
		})
		seen[k] = true
	}
	return w.counted()
}

// has reports whether key is in the output seen so far.
func (o *observer) has(key string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.keys[key] > 0
}

// waitKeys waits until every key is in the output.
func (o *observer) waitKeys(t *testing.T, timeout time.Duration, guard func() error, keys ...string) {
	t.Helper()
	waitFor(t, timeout, fmt.Sprintf("%d keys in the output", len(keys)), func() error {
		if err := guard(); err != nil {
			return err
		}
		for _, k := range keys {
			if !o.has(k) {
				return fmt.Errorf("%w: %.40s not in the output (%d records)", errNotYet, k, o.count())
			}
		}
		return nil
	})
}

// TestStrictJSONKeys: with DEDUP_KEY=json:id, values that are not one
// complete JSON document (leading zeros, bad numbers, truncation, trailing
// bytes) are unkeyed: every copy is forwarded and counted, never dropped,
// while valid documents are deduplicated by their id.
func TestStrictJSONKeys(t *testing.T) {
	_, brokers := newCluster(t)
	input := namesOf(t).input
	obs := startObserver(t, brokers)
	env := stageEnv(t, brokers, "file")
	env["DEDUP_KEY"] = "json:id"

	malformed := []string{`{"id":01}`, `{"id":02}`, `{"id":0x}`, `{"id":12ab}`, `{"id":"a"`, `{"id":"a"}x`}
	valid := []string{`{"id":"a"}`, `{"id":1}`}
	const end = `{"id":"end"}` // last record of the partition: once it is out, all before it are decided
	var values []string
	for _, v := range append(slices.Clone(malformed), valid...) {
		values = append(values, v, v)
	}
	values = append(values, end)
	w := &workload{}
	base := time.Now().Truncate(time.Millisecond)
	for i, v := range values {
		// Every record in one partition with one Kafka key: only the
		// value decides.
		w.recs = append(w.recs, inRecord{key: "k", value: v, ts: base.Add(time.Duration(i) * time.Millisecond), partition: 0, offset: -1})
	}

	p := startProc(t, "dedup-json", env)
	waitReady(t, p, 30*time.Second)
	produceRange(t, brokers, w, 0, len(w.recs))
	waitFor(t, 30*time.Second, "the last record in the output", func() error {
		if err := alive(p); err != nil {
			return err
		}
		obs.mu.Lock()
		defer obs.mu.Unlock()
		for _, r := range obs.recs {
			if r.value == end {
				return nil
			}
		}
		return fmt.Errorf("%w: %d output records", errNotYet, len(obs.recs))
	})
	// The counters are published on the worker's tick, after the outputs.
	waitFor(t, 30*time.Second, "every input counted in dedup_messages_total", func() error {
		if err := alive(p); err != nil {
			return err
		}
		if n := metric(t, p, "dedup_messages_total", map[string]string{"topic": input, "partition": "0"}); n < float64(len(values)) {
			return fmt.Errorf("%w: %v of %d", errNotYet, n, len(values))
		}
		return nil
	})
	unkeyed := metric(t, p, "dedup_messages_total", map[string]string{"topic": input, "partition": "0", "outcome": "unkeyed"})
	dups := metric(t, p, "dedup_messages_total", map[string]string{"topic": input, "partition": "0", "outcome": "duplicate"})
	total := metric(t, p, "dedup_messages_total", nil)
	p.termOK(t)

	byValue := map[string][]outRecord{}
	for _, o := range obs.drain(t, brokers) {
		byValue[o.value] = append(byValue[o.value], o)
	}
	offsets := map[string][]int64{}
	for _, r := range w.recs {
		offsets[r.value] = append(offsets[r.value], r.offset)
	}
	for _, v := range malformed {
		var got []string
		for _, o := range byValue[v] {
			got = append(got, o.headers[hdrSourceOffset])
		}
		slices.Sort(got)
		want := []string{strconv.FormatInt(offsets[v][0], 10), strconv.FormatInt(offsets[v][1], 10)}
		if !slices.Equal(got, want) {
			t.Errorf("malformed %s: output from input offsets %v, want both copies %v", v, got, want)
		}
	}
	for _, v := range append(slices.Clone(valid), end) {
		got := byValue[v]
		if len(got) != 1 || got[0].headers[hdrSourceOffset] != strconv.FormatInt(offsets[v][0], 10) {
			t.Errorf("valid %s: %d output records %v, want the first copy (input offset %d) only", v, len(got), got, offsets[v][0])
		}
	}
	if unkeyed != float64(2*len(malformed)) {
		t.Errorf(`dedup_messages_total{outcome="unkeyed"} = %v, want %d`, unkeyed, 2*len(malformed))
	}
	if dups != float64(len(valid)) {
		t.Errorf(`dedup_messages_total{outcome="duplicate"} = %v, want %d`, dups, len(valid))
	}
	if total != float64(len(values)) {
		t.Errorf("dedup_messages_total over all outcomes = %v, want %d (every input decided once)", total, len(values))
	}
}

// committed returns the group's committed input offsets (-1: none).
func committed(t *testing.T, brokers, group string) map[int32]int64 {
	t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = group
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic = namesOf(t).input
	for p := int32(0); p < numPartitions; p++ {
		rt.Partitions = append(rt.Partitions, p)
	}
	req.Topics = append(req.Topics, rt)
	resp := testkit.Request(t, brokers, "fetch committed offsets", req).(*kmsg.OffsetFetchResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		t.Fatalf("fetch committed offsets: %v", err)
	}
	out := map[int32]int64{}
	for _, tp := range resp.Topics {
		for _, p := range tp.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				t.Fatalf("fetch committed offset of partition %d: %v", p.Partition, err)
			}
			out[p.Partition] = p.Offset
		}
	}
	return out
}

// TestOutputRefusedForGood: a record larger than the output topic's
// max.message.bytes, with no DEAD_LETTER_TOPIC, is refused before it is
// written: one warning naming the partition, offset and setting, counted
// refused, never forwarded; its partition goes on (no stall, /healthz
// 200), its commit passes the record, and every other first occurrence is
// in the output exactly once.
func TestOutputRefusedForGood(t *testing.T) {
	_, brokers := newCluster(t)
	testkit.SetTopicConfig(t, brokers, namesOf(t).output, "max.message.bytes", "4096")
	obs := startObserver(t, brokers)
	env := stageEnv(t, brokers, "file")

	big := "big-" + strings.Repeat("x", 10<<10) // the key alone is over 4096 bytes
	var keys []string
	var parts []int32
	add := func(key string, p int32) { keys = append(keys, key); parts = append(parts, p) }
	for i := 0; i < 20; i++ {
		for p := int32(0); p < numPartitions; p++ {
			add(fmt.Sprintf("before-%d-%d", p, i), p)
		}
	}
	nBefore := len(keys)
	add(big, 0)
	for i := 0; i < 20; i++ {
		for p := int32(0); p < numPartitions; p++ {
			add(fmt.Sprintf("after-%d-%d", p, i), p)
		}
	}
	w := listWorkload(time.Now().Truncate(time.Millisecond), keys, parts)
	var later []string
	for i, r := range w.recs {
		if i > nBefore {
			later = append(later, r.key)
		}
	}

	a := startProc(t, "dedup-refused", env)
	waitReady(t, a, 30*time.Second)
	produceRange(t, brokers, w, 0, len(w.recs))
	bigOffset := w.recs[nBefore].offset
	// Partition 0 goes on after the refused record, as the others do.
	obs.waitKeys(t, 30*time.Second, func() error { return alive(a) }, later...)
	waitFor(t, 30*time.Second, "the refusal in the log", func() error {
		b, err := os.ReadFile(a.logPath)
		if err != nil {
			return err
		}
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, "record refused by the output") && strings.Contains(line, "partition=0") &&
				strings.Contains(line, fmt.Sprintf("offset=%d", bigOffset)) && strings.Contains(line, "max.message.bytes=4096") {
				return nil
			}
		}
		return fmt.Errorf("%w: no line naming the refused record", errNotYet)
	})
	if code := httpStatus(a.metrics, "/healthz"); code != http.StatusOK {
		t.Errorf("/healthz %d: a refused record does not stop the partition", code)
	}
	if n := metric(t, a, "dedup_partitions_stalled", nil); n != 0 {
		t.Errorf("dedup_partitions_stalled = %v, want 0", n)
	}
	waitFor(t, 30*time.Second, "the refused record counted", func() error {
		if n := metric(t, a, "dedup_messages_total", map[string]string{"outcome": "refused"}); n != 1 {
			return fmt.Errorf("%w: dedup_messages_total{outcome=refused} %v", errNotYet, n)
		}
		return nil
	})
	if n := metric(t, a, "dedup_output_errors_total", map[string]string{"kind": "refused"}); n != 1 {
		t.Errorf(`dedup_output_errors_total{kind="refused"} = %v, want 1`, n)
	}
	ends, err := endOffsets(brokers, namesOf(t).input)
	if err != nil {
		t.Fatalf("list input end offsets: %v", err)
	}
	waitFor(t, 30*time.Second, "every partition committed up to its end", func() error {
		if err := alive(a); err != nil {
			return err
		}
		c := committed(t, brokers, env["GROUP_ID"])
		for p := int32(0); p < numPartitions; p++ {
			if c[p] != ends[p] {
				return fmt.Errorf("%w: committed %v, input ends %v", errNotYet, c, ends)
			}
		}
		return nil
	})
	a.termOK(t)
	out := obs.drain(t, brokers)
	for _, o := range out {
		if o.key == big {
			t.Errorf("the refused record was forwarded: %s", o)
		}
	}
	w.recs[nBefore].first = false // refused: not expected in the output
	w.nFirsts--
	verify(t, w, out)
}

// TestPartitionSeriesFollowOwner: when a partition moves to another member,
// the member that lost it stops exposing every per-partition series of it,
// and keeps those of the partitions it still holds.
func TestPartitionSeriesFollowOwner(t *testing.T) {
	_, brokers := newCluster(t)
	obs := startObserver(t, brokers)
	env := stageEnv(t, brokers, "file")
	env["LOG_FORMAT"] = "json" // waitOwners reads the assignment from the log
	var keys []string
	var parts []int32
	for i := 0; i < 30; i++ {
		for p := int32(0); p < numPartitions; p++ {
			keys = append(keys, fmt.Sprintf("k-%d-%d", p, i), fmt.Sprintf("k-%d-%d", p, i))
			parts = append(parts, p, p)
		}
	}
	w := listWorkload(time.Now().Truncate(time.Millisecond), keys, parts)
	half := len(w.recs) / 2

	a := startProc(t, "dedup-a", env)
	waitOwners(t, func() error { return alive(a) }, a)
	produceRange(t, brokers, w, 0, half)
	obs.waitProgress(t, 30*time.Second, int64(w.firstsBefore[half]), "the first half forwarded", func() error { return alive(a) })
	if got := seriesPartitions(t, a, "dedup_messages_total"); !slices.Equal(got, []string{"0", "1", "2"}) {
		t.Fatalf("dedup_messages_total of %s covers partitions %v, want 0 1 2", a.name, got)
	}

	b := startProc(t, "dedup-b", env)
	guard := func() error { return alive(a, b) }
	owned := waitOwners(t, guard, a, b)
	var kept, lost []string
	for p := 0; p < numPartitions; p++ {
		if slices.Contains(owned[0], p) {
			kept = append(kept, strconv.Itoa(p))
		} else {
			lost = append(lost, strconv.Itoa(p))
		}
	}
	if len(lost) == 0 || len(kept) == 0 {
		t.Fatalf("after b joined, a owns %v and b %v: the test needs a to keep some and lose some", owned[0], owned[1])
	}
	produceRange(t, brokers, w, half, len(w.recs))
	obs.waitProgress(t, 30*time.Second, int64(w.nFirsts), "every key forwarded", guard)
	waitLagZero(t, a, b)

	// Every family with a partition label, on both members.
	for _, s := range mustScrape(t, a) {
		if s.labels["topic"] == namesOf(t).input && slices.Contains(lost, s.labels["partition"]) {
			t.Errorf("%s still exposes %s%v for partition %s, which moved to %s", a.name, s.name, s.labels, s.labels["partition"], b.name)
		}
	}
	if got := seriesPartitions(t, a, "dedup_messages_total"); !slices.Equal(got, kept) {
		t.Errorf("dedup_messages_total of %s covers partitions %v, want the kept ones %v", a.name, got, kept)
	}
	if got := seriesPartitions(t, b, "dedup_messages_total"); !slices.Equal(got, lost) {
		t.Errorf("dedup_messages_total of %s covers partitions %v, want the ones it took %v", b.name, got, lost)
	}
	a.termOK(t)
	b.termOK(t)
	verify(t, w, obs.drain(t, brokers))
}

// seriesPartitions lists, sorted, the input partitions family has series for
// on p.
func seriesPartitions(t *testing.T, p *proc, family string) []string {
	t.Helper()
	var out []string
	for _, s := range mustScrape(t, p) {
		if s.name == family && s.labels["topic"] == namesOf(t).input && !slices.Contains(out, s.labels["partition"]) {
			out = append(out, s.labels["partition"])
		}
	}
	slices.Sort(out)
	return out
}
