package processor

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"dedup/processor/partition"
)

// Outcomes of one input record, the values of dedup_messages_total{outcome}.
const (
	OutcomeForwarded  = "forwarded"
	OutcomeDuplicate  = "duplicate"
	OutcomeRetraction = "retraction"
	OutcomeUnkeyed    = "unkeyed"
	// The output refused the record for good (too large): written to the
	// dead-letter topic, or skipped without one.
	OutcomeDeadLettered = "dead_lettered"
	OutcomeRefused      = "refused"
)

// Kinds of dedup_timestamp_anomalies_total: records decided without moving
// event time.
const (
	AnomalyFuture  = "future"  // stamped further ahead of the wall clock than the allowed skew
	AnomalyMissing = "missing" // no timestamp (0 or negative)
)

// Metrics holds every dedup_ family. Build it with NewMetrics, which
// registers all of them at once so that /metrics lists each family from
// the start. Safe for concurrent use.
type Metrics struct {
	messages          *prometheus.CounterVec
	replaySuppressed  *prometheus.CounterVec
	tsAnomalies       *prometheus.CounterVec
	tsRewritten       *prometheus.CounterVec
	fill              *prometheus.GaugeVec
	estimatedKeys     *prometheus.GaugeVec
	fpRate            *prometheus.GaugeVec
	saturated         *prometheus.GaugeVec
	fpTarget          prometheus.Gauge
	expectedKeys      prometheus.Gauge
	windowSeconds     prometheus.Gauge
	windowElapsed     *prometheus.GaugeVec
	filterBytes       *prometheus.GaugeVec
	rotations         *prometheus.CounterVec
	overflows         *prometheus.CounterVec
	earlyRotations    *prometheus.CounterVec
	forgottenKeys     *prometheus.CounterVec
	stashed           *prometheus.GaugeVec
	lag               *prometheus.GaugeVec
	assigned          prometheus.Gauge
	memPredicted      prometheus.Gauge
	produceErrors     *prometheus.CounterVec
	outputErrors      *prometheus.CounterVec
	stalled           prometheus.Gauge
	latency           prometheus.Histogram
	checkpointSeconds *prometheus.HistogramVec
	checkpointPause   prometheus.Histogram
	checkpointDamaged *prometheus.CounterVec
	checkpointSize    *prometheus.GaugeVec
	checkpointLast    *prometheus.GaugeVec
	checkpoints       *prometheus.CounterVec
	checkpointFails   *prometheus.CounterVec
	restores          *prometheus.CounterVec
	restoreScanned    prometheus.Counter
	restoreSeconds    *prometheus.HistogramVec
	checkpointWritten *prometheus.CounterVec
	inputSkipped      *prometheus.CounterVec
	cluster           *clusterMetrics // cluster.go
}

// NewMetrics creates the dedup_ families and registers them on reg. It
// panics if reg already holds one of them, as prometheus.MustRegister does:
// that is a wiring mistake, not a runtime condition.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	pt := []string{"topic", "partition"}
	ptg := []string{"topic", "partition", "generation"}
	m := &Metrics{
		messages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dedup_messages_total",
			Help: "Input records by outcome: forwarded, duplicate, retraction, unkeyed; dead_lettered and refused for records the output cannot take (too large), written to DEAD_LETTER_TOPIC or skipped.",
		}, []string{"topic", "partition", "outcome"}),
		replaySuppressed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dedup_replay_suppressed_total",
			Help: "Replayed input records whose output was already in the output topic, not forwarded again.",
		}, pt),
		tsAnomalies: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dedup_timestamp_anomalies_total",
			Help: "Input records decided without moving event time, by kind: future (stamped further ahead of the wall clock than DEDUP_MAX_CLOCK_SKEW), missing (no timestamp: 0 or negative).",
		}, []string{"topic", "partition", "kind"}),
		tsRewritten: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dedup_timestamp_rewritten_total",
			Help: "Forwarded records read without a timestamp (0 or negative), written with timestamp -1: the writer cannot write 0 or keep another negative value.",
		}, pt),
		fill: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "dedup_filter_fill_ratio",
			Help: "Fraction of non-zero counters (counting), set bits (plain) or occupied slots (fingerprint) per filter generation.",
		}, ptg),
		estimatedKeys: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "dedup_filter_estimated_keys",
			Help: "Distinct keys estimated from the fill of each filter generation.",
		}, ptg),
		fpRate: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "dedup_filter_false_positive_rate",
			Help: "Estimated current false-positive rate of each filter generation.",
		}, ptg),
		saturated: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "dedup_filter_saturated_counters",
			Help: "Counters stuck at their maximum (counting mode); such keys can no longer be removed.",
		}, ptg),
		fpTarget: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "dedup_filter_false_positive_target",
			Help: "Configured target false-positive rate (DEDUP_FP_RATE).",
		}),
		expectedKeys: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "dedup_filter_expected_keys",
			Help: "Configured distinct keys per partition per window (DEDUP_EXPECTED_KEYS).",
		}),
		windowSeconds: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "dedup_filter_window_seconds",
			Help: "Configured window length (DEDUP_WINDOW).",
		}),
		windowElapsed: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "dedup_filter_window_elapsed_ratio",
			Help: "Fraction of the current window elapsed, by the event time of the last record.",
		}, pt),
		filterBytes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "dedup_filter_bytes",
			Help: "Memory held by both filter generations of a partition.",
		}, pt),
		rotations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dedup_rotations_total",
			Help: "Filter rotations (window boundaries crossed by event time).",
		}, pt),
		overflows: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dedup_filter_overflow_total",
			Help: "Keys the fingerprint filter's buckets refused, kept in the generation's exact stash instead (fingerprint mode; nothing is lost).",
		}, pt),
		earlyRotations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dedup_filter_early_rotations_total",
			Help: "Rotations forced by a full stash before the window ended (fingerprint mode): far more distinct keys than DEDUP_EXPECTED_KEYS.",
		}, pt),
		forgottenKeys: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dedup_filter_forgotten_keys_total",
			Help: "Keys dropped from the filters by early rotations before their window ended: a later duplicate of one is forwarded again (no new record is dropped).",
		}, pt),
		stashed: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "dedup_filter_stashed",
			Help: "Fingerprints held in each generation's exact stash (fingerprint mode); the pair rotates early when a stash is full.",
		}, ptg),
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "dedup_consumer_lag",
			Help: "Records between the last record read and the partition's high-water mark.",
		}, pt),
		assigned: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "dedup_assigned_partitions",
			Help: "Input partitions currently assigned to this member.",
		}),
		memPredicted: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "dedup_memory_predicted_bytes",
			Help: "Live memory this member predicts for itself from its assigned partitions: the model `dedup size` uses (filter pairs of the assigned partitions plus the spare, a fetch per partition, a batch per output partition, the runtime base). Compare with process_resident_memory_bytes.",
		}),
		produceErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dedup_produce_errors_total",
			Help: "Output records the writer failed to deliver after its retries.",
		}, []string{"topic"}),
		outputErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dedup_output_errors_total",
			Help: "Failed produce requests by kind: retriable (not appended, retried), ambiguous (outcome unknown, resolved by reading the output back), refused (records the output cannot take: too large for the output topic's max.message.bytes or PRODUCE_BATCH_BYTES, found before writing or refused by the broker; other permanent refusals stop the partition).",
		}, []string{"kind"}),
		stalled: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "dedup_partitions_stalled",
			Help: "Input partitions of this member stopped because the output topic refused one of their records for good.",
		}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "dedup_end_to_end_latency_seconds",
			Help:    "Output acknowledgement time minus input record timestamp.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10), // 1ms .. ~4.4min
		}),
		checkpointSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "dedup_checkpoint_duration_seconds",
			Help:    "Time from the end-offset read to the durable save of a checkpoint.",
			Buckets: prometheus.ExponentialBuckets(0.001, 3, 10), // 1ms .. ~20s
		}, []string{"store"}),
		checkpointPause: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "dedup_checkpoint_pause_seconds",
			Help: "Time a partition's worker stops consuming for a periodic checkpoint: flush of its buffered outputs and copy of its filter pair into the spare.",
			// 100µs .. ~5.9s: a copy of a few MB up to pairs of GBs.
			Buckets: prometheus.ExponentialBuckets(0.0001, 3, 11),
		}),
		checkpointSize: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "dedup_checkpoint_size_bytes",
			Help: "Size of the last checkpoint: raw (uncompressed) and stored.",
		}, []string{"topic", "partition", "kind"}),
		checkpointLast: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "dedup_checkpoint_last_success_timestamp_seconds",
			Help: "Unix time of the last successful checkpoint; age = time() - this.",
		}, pt),
		checkpoints: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dedup_checkpoints_total",
			Help: "Checkpoints saved and committed.",
		}, pt),
		checkpointFails: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dedup_checkpoint_failures_total",
			Help: "Checkpoints that failed (nothing was committed for them).",
		}, pt),
		restores: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dedup_restores_total",
			Help: "Partition assignments by where the filter state came from: memory (kept from the previous generation), latest, fallback (snapshots of the store) or empty.",
		}, []string{"source"}),
		restoreScanned: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "dedup_restore_scanned_records_total",
			Help: "Output records read by the replay scans of restores from the store.",
		}),
		restoreSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "dedup_restore_duration_seconds",
			Help:    "Time a restore from the checkpoint store took to load and decode a partition's chain: its base and the increments on it (the replay scan after it is not included).",
			Buckets: prometheus.ExponentialBuckets(0.001, 3, 11), // 1ms .. ~59s
		}, []string{"store"}),
		checkpointWritten: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dedup_checkpoint_written_bytes_total",
			Help: "Bytes the partition's checkpoints wrote to the store (as stored, compressed), by piece: base (the whole filter state) or increment (what changed since the previous piece). The checkpoint bandwidth is rate() of this.",
		}, []string{"topic", "partition", "piece"}),
		checkpointDamaged: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dedup_checkpoint_damaged_total",
			Help: "Damaged snapshots of the partition found in the checkpoint store (checksum, truncation, format, missing chunk, or refused by decode), each logged at warn naming it; kept aside, never deleted.",
		}, pt),
		inputSkipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dedup_input_skipped_offsets_total",
			Help: "Input offsets the stage never read because they were below the partition's log start when it got there (deleted by retention or DeleteRecords while the stage was down or behind): their records were neither deduplicated nor forwarded.",
		}, pt),
	}
	reg.MustRegister(
		m.messages, m.replaySuppressed, m.tsAnomalies, m.tsRewritten, m.fill, m.estimatedKeys, m.fpRate, m.saturated,
		m.fpTarget, m.expectedKeys, m.windowSeconds, m.windowElapsed, m.filterBytes,
		m.rotations, m.overflows, m.earlyRotations, m.forgottenKeys, m.stashed, m.lag, m.assigned, m.memPredicted, m.produceErrors, m.outputErrors, m.stalled, m.latency, m.checkpointSeconds,
		m.checkpointPause, m.checkpointSize, m.checkpointLast, m.checkpoints, m.checkpointFails, m.restores,
		m.restoreScanned, m.inputSkipped, m.checkpointDamaged, m.restoreSeconds, m.checkpointWritten,
	)
	m.cluster = newClusterMetrics(reg)
	for _, s := range []string{string(partition.SourceMemory), "latest", "fallback", "empty"} {
		m.restores.WithLabelValues(s)
	}
	for _, k := range []string{OutputRetriable, OutputAmbiguous, OutputRefused} {
		m.outputErrors.WithLabelValues(k)
	}
	return m
}

// forget deletes every series of input partition part of topic, so that
// a partition this member no longer owns leaves no stale values behind.
func (m *Metrics) forget(topic string, part int) {
	l := prometheus.Labels{"topic": topic, "partition": strconv.Itoa(part)}
	for _, v := range []interface {
		DeletePartialMatch(prometheus.Labels) int
	}{
		m.messages, m.replaySuppressed, m.tsAnomalies, m.tsRewritten, m.fill, m.estimatedKeys, m.fpRate,
		m.saturated, m.windowElapsed, m.filterBytes, m.rotations, m.overflows, m.earlyRotations,
		m.forgottenKeys, m.stashed, m.lag, m.checkpointSize,
		m.checkpointLast, m.checkpoints, m.checkpointFails, m.inputSkipped, m.checkpointDamaged, m.checkpointWritten,
	} {
		v.DeletePartialMatch(l)
	}
}

// partition returns one partition's series; storeKind labels its
// checkpoint durations.
func (m *Metrics) partition(topic string, part int, storeKind string) *partition.Metrics {
	p := strconv.Itoa(part)
	pm := &partition.Metrics{
		Forwarded:        m.messages.WithLabelValues(topic, p, OutcomeForwarded),
		Duplicate:        m.messages.WithLabelValues(topic, p, OutcomeDuplicate),
		Retraction:       m.messages.WithLabelValues(topic, p, OutcomeRetraction),
		Unkeyed:          m.messages.WithLabelValues(topic, p, OutcomeUnkeyed),
		Refused:          m.messages.WithLabelValues(topic, p, OutcomeRefused),
		DeadLettered:     m.messages.WithLabelValues(topic, p, OutcomeDeadLettered),
		ReplaySuppressed: m.replaySuppressed.WithLabelValues(topic, p),
		WindowElapsed:    m.windowElapsed.WithLabelValues(topic, p),
		Bytes:            m.filterBytes.WithLabelValues(topic, p),
		Lag:              m.lag.WithLabelValues(topic, p),
		Rotations:        m.rotations.WithLabelValues(topic, p),
		Overflows:        m.overflows.WithLabelValues(topic, p),
		EarlyRotations:   m.earlyRotations.WithLabelValues(topic, p),
		ForgottenKeys:    m.forgottenKeys.WithLabelValues(topic, p),
		CheckpointRaw:    m.checkpointSize.WithLabelValues(topic, p, "raw"),
		CheckpointStored: m.checkpointSize.WithLabelValues(topic, p, "stored"),
		CheckpointLast:   m.checkpointLast.WithLabelValues(topic, p),
		Checkpoints:      m.checkpoints.WithLabelValues(topic, p),
		CheckpointFails:  m.checkpointFails.WithLabelValues(topic, p),
		CheckpointPause:  m.checkpointPause,
		Restores:         m.restores,

		FutureTimestamps:    m.tsAnomalies.WithLabelValues(topic, p, AnomalyFuture),
		MissingTimestamps:   m.tsAnomalies.WithLabelValues(topic, p, AnomalyMissing),
		RewrittenTimestamps: m.tsRewritten.WithLabelValues(topic, p),
		RestoreScanned:      m.restoreScanned,
		SkippedOffsets:      m.inputSkipped.WithLabelValues(topic, p),
		CheckpointDamaged:   m.checkpointDamaged.WithLabelValues(topic, p),
	}
	if storeKind != "" { // without a store there are no checkpoints to time
		pm.CheckpointSeconds = m.checkpointSeconds.WithLabelValues(storeKind)
		pm.RestoreSeconds = m.restoreSeconds.WithLabelValues(storeKind)
		for i, piece := range partition.PieceLabels {
			pm.CheckpointWritten[i] = m.checkpointWritten.WithLabelValues(topic, p, piece)
		}
	}
	for i, g := range []string{"current", "previous"} {
		pm.Fill[i] = m.fill.WithLabelValues(topic, p, g)
		pm.EstKeys[i] = m.estimatedKeys.WithLabelValues(topic, p, g)
		pm.FPRate[i] = m.fpRate.WithLabelValues(topic, p, g)
		pm.Saturated[i] = m.saturated.WithLabelValues(topic, p, g)
		pm.Stashed[i] = m.stashed.WithLabelValues(topic, p, g)
	}
	return pm
}
