package output

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
)

// Failures is the state of the outputs that failed and are not delivered
// yet, by input partition, whatever the failure:
//
//   - recovering (Failed): a produce failure ended the generation; the
//     writer is replaced and the partition restores and replays, until
//     its output at the failed offset is delivered. The streak since its
//     first failure is bounded by the recovery timeout (Overdue).
//   - isolated: the broker refused a batch the size check let through;
//     the partition also writes its next outputs alone (a Probe) from the
//     refused offset on, so that the refused record is named.
//   - stalled: the output refused a record for good (an authorization
//     failure, a deleted topic); the partition stops consuming, counted in
//     dedup_partitions_stalled, until the record is delivered after the
//     partition is assigned again.
//
// Each ends when the partition's output up to the offset is delivered
// (Delivered) or the partition moves to another member (Forget). Safe for
// concurrent use.
type Failures struct {
	log           *slog.Logger
	input, output string           // topics, for logs
	dropped       string           // the drop topic, for logs (WithDropped)
	stalledGauge  prometheus.Gauge // dedup_partitions_stalled
	mu            sync.Mutex
	since         time.Time     // first failure of the recovery streak; zero when none
	err           *ProduceError // the latest
	failedAt      map[int]int64 // input partition -> input offset whose output failed, until delivered
	attempts      int           // writer replacements in this streak
	isolateAt     map[int]int64 // input partition -> offset from which its outputs are written alone
	// broken is the last writer a record failed in: to be replaced before
	// the next generation if it is still the current one. A writer is
	// closed, which waits for its last acknowledgements, before its
	// successor opens, so no failure of an earlier writer comes later.
	broken  *Writer
	stalled map[int]*ProduceError
}

// NewFailures returns an empty state.
func NewFailures(log *slog.Logger, inputTopic, outputTopic string, stalled prometheus.Gauge) *Failures {
	return &Failures{log: log, input: inputTopic, output: outputTopic, stalledGauge: stalled,
		failedAt: map[int]int64{}, isolateAt: map[int]int64{}, stalled: map[int]*ProduceError{}}
}

// WithDropped names the drop topic in the logs of f.
func (f *Failures) WithDropped(topic string) *Failures {
	f.dropped = topic
	return f
}

// Failed records a partition's produce failure and reports whether the
// partition is stopped for good (stalled): it then no longer consumes
// until the generation ends. Otherwise w is broken and the worker's
// return ends the generation.
func (f *Failures) Failed(w *Writer, perr *ProduceError) (stalled bool) {
	switch {
	case perr.Dropped && (Refused(perr) || RecordRefused(perr)):
		// The drop topic refused a duplicate the size check let through:
		// stopped as for any refusal, since writing drops alone (the
		// output's probe) is not worth its machinery for the drop topic.
		// The next start reads its limits again, and the check then
		// names and skips a record that no longer fits.
		f.stall(perr)
		return true
	case RecordRefused(perr):
		// The output refused a record the size check let through: its
		// limit may have been lowered, or the record is invalid. The
		// generation ends as for any produce failure; the next one reads
		// the limits again, replays, and writes the partition's next
		// outputs alone, so that the record the broker refuses is named
		// and refused by itself (dead letter or skip).
		f.isolate(perr)
		f.recover(w, perr)
	case Refused(perr):
		// Stopped, not retried: the refusal would repeat.
		f.stall(perr)
		return true
	default:
		f.recover(w, perr)
	}
	return false
}

// recover starts (or continues) a recovery: the worker that got perr
// returns next, which ends the generation.
func (f *Failures) recover(w *Writer, perr *ProduceError) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.broken = w
	if f.since.IsZero() {
		f.since = time.Now()
	}
	f.err = perr
	f.failedAt[perr.Partition] = perr.Offset
	f.log.Warn("produce failed: ending the generation to restore with a new writer",
		"topic", f.input, "partition", perr.Partition, "offset", perr.Offset, "err", perr.Err,
		"failing_for", time.Since(f.since).Round(time.Millisecond))
}

// isolate notes that partition's outputs from the refused offset on are
// to be written alone in its next generations, until delivered.
func (f *Failures) isolate(perr *ProduceError) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if off, ok := f.isolateAt[perr.Partition]; !ok || perr.Offset < off {
		f.isolateAt[perr.Partition] = perr.Offset
	}
}

// stall stops an input partition whose output was refused for good: it
// logs the refused record, counts the partition as stalled and keeps it so
// for Err until the record is delivered (after the cause is fixed and the
// partition is restored again) or the partition moves to another member.
// Nothing at or after the refused offset was committed or checkpointed:
// the worker's ack tracker holds the failure.
func (f *Failures) stall(perr *ProduceError) {
	f.mu.Lock()
	f.stalled[perr.Partition] = perr
	f.stalledGauge.Set(float64(len(f.stalled)))
	// Stopped, not recovering (a record refusal retried once was): the
	// stall reports it, and no recovery deadline runs for it.
	delete(f.failedAt, perr.Partition)
	if len(f.failedAt) == 0 {
		f.resetStreak()
	}
	f.mu.Unlock()
	outPart, outTopic := -1, f.output
	if perr.Dropped {
		outTopic = f.dropped
	}
	var oe *OutputError
	if errors.As(perr, &oe) {
		outPart, outTopic = oe.Partition, cmp.Or(oe.Topic, outTopic)
	}
	msg := "output refused a record for good: partition stopped, nothing at or after the offset is committed; fix the cause (ACLs, the topic) and restart the member"
	if perr.Dropped {
		msg = "drop topic refused a duplicate for good: partition stopped, nothing at or after the offset is committed; fix the cause (ACLs, the topic, its max.message.bytes) and restart the member"
	}
	f.log.Error(msg,
		"output_topic", outTopic, "output_partition", outPart,
		"topic", f.input, "partition", perr.Partition, "offset", perr.Offset, "err", perr.Err)
}

// broke notes that a record failed in w.
func (f *Failures) broke(w *Writer) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.broken = w
}

// Broken reports whether a record failed in w: it is to be replaced
// before the next generation.
func (f *Failures) Broken(w *Writer) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.broken == w
}

// Replacing counts a writer replacement of the streak and returns how
// many came before it.
func (f *Failures) Replacing() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.attempts++
	return f.attempts - 1
}

// IsolateFrom returns the input offset from which partition writes its
// outputs alone, or -1.
func (f *Failures) IsolateFrom(partition int) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	if off, ok := f.isolateAt[partition]; ok {
		return off
	}
	return -1
}

// Isolating reports whether a partition writes outputs alone.
func (f *Failures) Isolating() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.isolateAt) > 0
}

// FailedOffset returns the lowest input offset of partition whose output
// failed and is not yet delivered, or -1.
func (f *Failures) FailedOffset(partition int) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	off := int64(-1)
	if perr, ok := f.stalled[partition]; ok {
		off = perr.Offset
	}
	if o, ok := f.failedAt[partition]; ok && (off < 0 || o < off) {
		off = o
	}
	return off
}

// Delivered reports that the output of partition's input up to offset
// has now been acknowledged (or found already in the output): every
// failure at or below it, recovering, isolated and stalled alike, is
// settled, not only the lower one that FailedOffset named.
func (f *Failures) Delivered(partition int, offset int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range []map[int]int64{f.failedAt, f.isolateAt} {
		if off, ok := m[partition]; ok && off <= offset {
			delete(m, partition)
		}
	}
	if perr, ok := f.stalled[partition]; ok && perr.Offset <= offset {
		delete(f.stalled, partition)
	}
	f.stalledGauge.Set(float64(len(f.stalled)))
	f.settleLocked()
}

// Forget drops the failures of partitions this member no longer holds:
// they are now another member's.
func (f *Failures) Forget(assigned []kafka.PartitionAssignment) {
	held := func(part int) bool {
		return slices.ContainsFunc(assigned, func(a kafka.PartitionAssignment) bool { return a.ID == part })
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range []map[int]int64{f.failedAt, f.isolateAt} {
		for part := range m {
			if !held(part) {
				delete(m, part)
			}
		}
	}
	for part := range f.stalled {
		if !held(part) {
			delete(f.stalled, part)
		}
	}
	f.stalledGauge.Set(float64(len(f.stalled)))
	f.settleLocked()
}

// settleLocked ends the recovery streak once nothing of it is left.
func (f *Failures) settleLocked() {
	if len(f.failedAt) > 0 || f.since.IsZero() {
		return
	}
	f.log.Info("recovered from produce failure", "after", time.Since(f.since).Round(time.Millisecond),
		"writers_replaced", f.attempts)
	f.resetStreak()
}

func (f *Failures) resetStreak() { f.since, f.err, f.attempts = time.Time{}, nil, 0 }

// Overdue returns an error when the recovery streak has lasted longer
// than timeout, else nil.
func (f *Failures) Overdue(timeout time.Duration) error {
	f.mu.Lock()
	since, perr := f.since, f.err
	f.mu.Unlock()
	if !since.IsZero() && time.Since(since) > timeout {
		return fmt.Errorf("output undeliverable for %v: %w", time.Since(since).Round(time.Millisecond), perr)
	}
	return nil
}

// Err returns nil when every output was delivered; while a recovery runs,
// an error wrapping ErrRecovering and the *ProduceError; while input
// partitions are stalled, ErrOutputRefused with the lowest stalled
// partition's *ProduceError.
func (f *Failures) Err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.since.IsZero() {
		return fmt.Errorf("%w since %s: %w", ErrRecovering, f.since.Format(time.RFC3339), f.err)
	}
	if len(f.stalled) == 0 {
		return nil
	}
	parts := slices.Sorted(maps.Keys(f.stalled))
	return fmt.Errorf("%w (input partitions %v): %w", ErrOutputRefused, parts, f.stalled[parts[0]])
}
