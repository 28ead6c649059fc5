package e2e_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

const (
	droppedRecords = 20000
	droppedKills   = 3
)

// TestDroppedTopicCrash: with DROPPED_TOPIC set and three SIGKILLs of the
// built binary mid-stream, the drop topic holds each dropped input record
// exactly once (by its source headers), unchanged and marked as a
// duplicate; their count equals the workload's duplicates (the records the
// stage counts as outcome duplicate, every one within seconds of its first
// occurrence), and nothing is lost from the output (verify).
func TestDroppedTopicCrash(t *testing.T) {
	for _, store := range []string{"file", "kafka"} {
		t.Run(store, func(t *testing.T) { testDroppedTopicCrash(t, store) })
	}
}

func testDroppedTopicCrash(t *testing.T, store string) {
	sc := newScenario(t, droppedRecords)
	rng, brokers, w, obs := sc.rng, sc.brokers, sc.w, sc.obs
	env := stageEnv(t, brokers, store)
	dropped := env["OUTPUT_TOPIC"] + "-dropped"
	createTopics(t, brokers, dropped)
	env["DROPPED_TOPIC"] = dropped

	var names procSet
	p := startProc(t, names.next("dedup"), env)
	pr := startProducer(t, brokers, w, obs, 1500)
	guard := func() error {
		if err := pr.check(); err != nil {
			return err
		}
		return alive(p)
	}
	base := obs.progress()
	for i, at := range killPoints(rng, w.nFirsts, droppedKills) {
		target, left := stopTarget(at, base, w.nFirsts)
		if left {
			waitJoined(t, p, 30*time.Second, guard)
			obs.waitProgress(t, 60*time.Second, target, fmt.Sprintf("the output to reach kill point %d (%d keys)", i+1, target), guard)
		} else {
			waitReady(t, p, 30*time.Second)
		}
		p.kill(t)
		t.Logf("SIGKILL %d/%d: %s at %d keys forwarded", i+1, droppedKills, p.name, obs.progress())
		p = startProc(t, names.next("dedup"), env)
		base = obs.progress()
	}
	sc.finish(t, pr, guard, 60*time.Second, p)
	recs, err := readTopic(brokers, dropped)
	if err != nil {
		t.Fatal(err)
	}
	drops := make([]outRecord, len(recs))
	for i, r := range recs {
		h := make(map[string]string, len(r.Headers))
		for _, hd := range r.Headers {
			h[hd.Key] = string(hd.Value)
		}
		drops[i] = outRecord{key: string(r.Key), value: string(r.Value), ts: r.Timestamp, partition: r.Partition, offset: r.Offset, headers: h}
	}
	checkDropped(t, w, env["INPUT_TOPIC"], drops)
}

// checkDropped asserts that drops hold every input record of w that is
// not the first of its key exactly once, by source headers, unchanged and
// with the drop headers, and nothing else.
func checkDropped(t *testing.T, w *workload, input string, drops []outRecord) {
	t.Helper()
	type src struct {
		partition int32
		offset    int64
	}
	want := map[src]*inRecord{}
	for i := range w.recs {
		if r := &w.recs[i]; !r.first {
			want[src{r.partition, r.offset}] = r
		}
	}
	got := map[src]int{}
	var wrong []string
	for _, d := range drops {
		p, _ := strconv.Atoi(d.headers[hdrSourcePartition])
		off, _ := strconv.ParseInt(d.headers[hdrSourceOffset], 10, 64)
		s := src{int32(p), off}
		got[s]++
		in := want[s]
		switch {
		case in == nil || d.headers[hdrSourceTopic] != input:
			wrong = append(wrong, "no duplicate input: "+d.String())
		case d.key != in.key || d.value != in.value || !d.ts.Equal(in.ts) || d.headers["e2e-seq"] != strings.TrimPrefix(in.value, "v"):
			wrong = append(wrong, "differs from its input: "+d.String())
		case d.headers["dedup-drop-reason"] != "duplicate" || (d.headers["dedup-drop-generation"] != "current" && d.headers["dedup-drop-generation"] != "previous") ||
			d.headers["dedup-drop-window-start"] == "" || d.headers["dedup-drop-window-end"] == "":
			wrong = append(wrong, fmt.Sprintf("drop headers %v: %s", d.headers, d))
		}
	}
	missing, twice := 0, 0
	for s := range want {
		switch got[s] {
		case 0:
			missing++
		case 1:
		default:
			twice++
		}
	}
	t.Logf("drop topic: %d records for %d duplicates", len(drops), w.dups())
	if missing > 0 || twice > 0 || len(wrong) > 0 || len(drops) != w.dups() {
		t.Errorf("drop topic: %d records, want %d (the duplicates); %d duplicates missing, %d written more than once, %d wrong; first wrong: %v",
			len(drops), w.dups(), missing, twice, len(wrong), wrong[:min(len(wrong), 5)])
	}
}
