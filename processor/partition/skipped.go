package partition

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
)

// Input below a partition's log start (deleted by retention or
// DeleteRecords while the stage was down or behind) can only be skipped:
// the stage never reads it, so it neither deduplicates nor forwards it.
// Every skip is named in the log and counted in
// dedup_input_skipped_offsets_total, wherever it is decided:
//
//   - at the start of a partition, by Start, which compares the offset it
//     resumes at with the log start and seeks there itself;
//   - at runtime, by kafka-go's reader, which answers OFFSET_OUT_OF_RANGE
//     below the log start by jumping to it (its error logger says so), and
//     which clamps to the log start when it reconnects below it (its
//     logger says where it was asked to start and where it seeks).
//
// readerLog recognises those decisions by kafka-go's format strings
// (v0.4.51), which it is given apart from their arguments;
// TestReaderFormatsMatchKafkaGo fails if a kafka-go upgrade rewords one.
const (
	fmtSkipping = "the kafka reader is reading before the first offset for partition %d of %s, skipping from offset %d to %d (%d messages)"
	fmtInit     = "initializing kafka reader for partition %d of %s starting at offset %d"
	fmtSeek     = "the kafka reader for partition %d of %s is seeking to offset %d"
	fmtPastEnd  = "the kafka reader is reading passed the last offset for partition %d of %s at offset %d"
	// fmtInitError with OFFSET_OUT_OF_RANGE: the reader (re)connected and
	// could not seek to its offset, so the offset lies past the log's end
	// (one below the log start is clamped to it first, fmtSeek). It
	// retries every second.
	fmtInitError = "error initializing the kafka reader for partition %d of %s: %s"
)

// transient are the reader's error-logger messages about conditions it
// retries (connections, leaders, metadata). The cluster watch and the
// errors the reader returns report their causes once; a line per retry
// would repeat them every back-off, so they go to debug.
var transient = map[string]bool{
	fmtInitError: true,
	"failed to read from current broker %v for partition %d of %s at offset %d: %v":                                                                                 true,
	"failed to read from current broker for partition %d of %s at offset %d: %v":                                                                                    true,
	"the kafka reader got an unknown error reading partition %d of %s at offset %d: %s":                                                                             true,
	"the kafka reader got an error while attempting to determine whether it was reading before the first offset or after the last offset of partition %d of %s: %s": true,
}

// readerWarnEvery bounds how often one kind of reader message other than a
// skip is logged at warn while it repeats (kafka-go retries with a back-off
// of at most a second).
const readerWarnEvery = time.Minute

// readerLog is the partition's kafka-go reader logger (Logger, chatty:
// debug) or error logger (warn, but for transient conditions). Both see
// the skips; they share one state, as the reader logs from its own
// goroutines.
type readerLog struct {
	s     *readerSkips
	error bool // the error logger
}

type readerSkips struct {
	w *Worker

	mu        sync.Mutex
	requested int64                // offset the reader was last asked to start at; -1: none pending
	seeking   int64                // offset the reader last seeks to (fmtSeek); -1: none
	warned    map[string]time.Time // format -> last warn line
}

func newReaderLoggers(w *Worker) (logger, errorLogger readerLog) {
	s := &readerSkips{w: w, requested: -1, seeking: -1, warned: map[string]time.Time{}}
	return readerLog{s: s}, readerLog{s: s, error: true}
}

func (l readerLog) Printf(format string, args ...any) {
	s, log := l.s, l.s.w.log
	switch format {
	case fmtSkipping:
		// partition, topic, from, to, count
		from, ok1 := offsetArg(args, 2)
		to, ok2 := offsetArg(args, 3)
		if ok1 && ok2 {
			s.w.skipped(from, to, "reader: fetch below the log start")
			return
		}
	case fmtInit:
		if off, ok := offsetArg(args, 2); ok {
			s.mu.Lock()
			s.requested = off
			s.mu.Unlock()
		}
	case fmtSeek:
		// The reader (re)connected: it seeks where it was asked, or to the
		// log start when that is past it.
		off, ok := offsetArg(args, 2)
		s.mu.Lock()
		from := s.requested
		s.requested = -1
		if ok {
			s.seeking = off
		}
		s.mu.Unlock()
		if ok && from >= 0 && off > from {
			s.w.skipped(from, off, "reader: seek clamped to the log start")
		}
	case fmtPastEnd:
		// The log may end below the offset the reader is at: truncated
		// under it. The reader would retry until the log passed the
		// offset; the worker checks the log's end at its next tick and
		// reads on from there (Worker.readPastEnd), naming and counting
		// it then.
		if off, ok := offsetArg(args, 2); ok {
			s.w.pastEnd.Store(off)
		}
		return
	case fmtInitError:
		// The same past the end, found when the reader (re)connects (a
		// new leader, the topic created again): logged at debug below,
		// as the worker names it once it has read the log's end.
		if len(args) > 2 {
			if err, ok := args[2].(error); ok && errors.Is(err, kafka.OffsetOutOfRange) {
				s.mu.Lock()
				off := s.seeking
				s.mu.Unlock()
				if off >= 0 {
					s.w.pastEnd.Store(off)
				}
			}
		}
	}
	level := slog.LevelDebug
	if l.error && !transient[format] {
		// Anything else the reader decides (a message this version does
		// not know) is said at warn, once per minute while it repeats.
		now := time.Now()
		s.mu.Lock()
		if last, seen := s.warned[format]; !seen || now.Sub(last) >= readerWarnEvery {
			s.warned[format] = now
			level = slog.LevelWarn
		}
		s.mu.Unlock()
	}
	ctx := context.Background()
	if log.Enabled(ctx, level) { // the chatty logger is not formatted for nothing
		log.Log(ctx, level, fmt.Sprintf(format, args...), "component", "reader")
	}
}

// offsetArg reads args[i] as an offset: kafka-go passes offsets as int64 or
// as its own integer type that prints logical offsets by name.
func offsetArg(args []any, i int) (int64, bool) {
	if i >= len(args) {
		return 0, false
	}
	v := reflect.ValueOf(args[i])
	switch v.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return v.Int(), true
	}
	return 0, false
}

// skipped names and counts the offsets from expected up to start that the
// partition will never read: they were below the log start when it got
// there.
func (w *Worker) skipped(expected, start int64, at string) {
	n := start - expected
	if expected < 0 || n <= 0 {
		return
	}
	w.d.Metrics.SkippedOffsets.Add(float64(n))
	w.log.Warn("input skipped: offsets below the partition's log start were deleted (retention or DeleteRecords) "+
		"before the stage read them; their records are neither deduplicated nor forwarded",
		"expected_offset", expected, "log_start_offset", start, "skipped_offsets", n, "at", at)
}

// truncated names and counts a partition whose log ends at end, below the
// offset expected it was to read next: the log was truncated (an unclean
// leader election) or the topic deleted and created again. Records the
// new log holds from end up to expected would otherwise never be read.
func (w *Worker) truncated(expected, end int64, at string) {
	if c := w.d.Metrics.InputTruncations; c != nil {
		c.Inc()
	}
	w.log.Error("input truncated: the partition's log ends below the offset the stage was to read next "+
		"(an unclean leader election, or the topic deleted and created again); reading from its end",
		"expected_offset", expected, "end_offset", end, "at", at)
}
