package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"dedup/key"
	"dedup/processor/output"
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

// Kinds of dedup_repartition_control_records_total.
const (
	ControlReset   = "reset"   // dedup_repartition_control_records_total: marks lowered
	ControlUnknown = "unknown" // dedup_repartition_control_records_total: unknown trailer flags, the partition stopped
)

// Kinds of dedup_timestamp_anomalies_total: records decided without moving
// event time.
const (
	AnomalyFuture  = "future"  // stamped further ahead of the wall clock than the allowed skew
	AnomalyMissing = "missing" // no timestamp (0 or negative)
)

// Metrics holds every dedup_ family. Build it with New, which
// registers all of them at once so that /metrics lists each family from
// the start. Safe for concurrent use.
type Metrics struct {
	Messages         *prometheus.CounterVec
	ReplaySuppressed *prometheus.CounterVec
	// DROPPED_TOPIC: duplicates written there, and those not written by
	// reason (DroppedSampledOut, DroppedRefused, DroppedReplayed).
	DroppedWritten, DroppedSkipped *prometheus.CounterVec
	// Unkeyed input records by reason (key.Status), per instance: the
	// series outlive a partition's move.
	UnkeyedReasons *prometheus.CounterVec
	// 1 while a partition's records wait for their schema.
	KeyWaiting *prometheus.GaugeVec
	// The false drops the filters' false-positive rate makes expected.
	ExpectedFalseDrops *prometheus.CounterVec
	// The repartition hop (REPARTITION_TOPIC): records hop 2 dropped as
	// hop 1's re-sends, and records of the repartition topic without an
	// origin trailer; labelled by the repartition topic and partition.
	RepartitionResent   *prometheus.CounterVec
	RepartitionUnmarked *prometheus.CounterVec
	// Control records of the repartition topic hop 2 applied or skipped,
	// by kind (ControlReset, ControlUnknown).
	RepartitionControl *prometheus.CounterVec
	// Hop 1 (processor/repartition), labelled by input topic and
	// partition: records acknowledged by the repartition topic, failed
	// batches sent again, and input records not yet acknowledged there.
	RepartitionRekeyed  *prometheus.CounterVec
	RepartitionRestarts *prometheus.CounterVec
	RepartitionInputLag *prometheus.GaugeVec
	// 1 while hop 1 is unhealthy (repartition.Status).
	RepartitionUnhealthy prometheus.Gauge
	TimestampAnomalies   *prometheus.CounterVec
	TimestampRewritten   *prometheus.CounterVec
	Fill                 *prometheus.GaugeVec
	EstimatedKeys        *prometheus.GaugeVec
	FPRate               *prometheus.GaugeVec
	Saturated            *prometheus.GaugeVec
	FPTarget             prometheus.Gauge
	ExpectedKeys         prometheus.Gauge
	WindowSeconds        prometheus.Gauge
	WindowElapsed        *prometheus.GaugeVec
	FilterBytes          *prometheus.GaugeVec
	Rotations            *prometheus.CounterVec
	Overflows            *prometheus.CounterVec
	EarlyRotations       *prometheus.CounterVec
	ForgottenKeys        *prometheus.CounterVec
	Stashed              *prometheus.GaugeVec
	Lag                  *prometheus.GaugeVec
	Assigned             prometheus.Gauge
	MemPredicted         prometheus.Gauge
	ProduceErrors        *prometheus.CounterVec
	OutputErrors         *prometheus.CounterVec
	OutputTruncations    *prometheus.CounterVec
	Stalled              prometheus.Gauge
	Latency              prometheus.Histogram
	CheckpointSeconds    *prometheus.HistogramVec
	CheckpointPause      prometheus.Histogram
	CheckpointDamaged    *prometheus.CounterVec
	CheckpointMissing    *prometheus.CounterVec
	InputTruncations     *prometheus.CounterVec
	CheckpointSize       *prometheus.GaugeVec
	CheckpointLast       *prometheus.GaugeVec
	Checkpoints          *prometheus.CounterVec
	CheckpointFails      *prometheus.CounterVec
	Restores             *prometheus.CounterVec
	RestoreScanned       prometheus.Counter
	RestoreSeconds       *prometheus.HistogramVec
	CheckpointWritten    *prometheus.CounterVec
	// The instance's total of CheckpointWritten, by piece: never deleted,
	// so rate() keeps what a partition wrote just before it moved.
	CheckpointInstanceWritten *prometheus.CounterVec
	InputSkipped              *prometheus.CounterVec
	// The cluster watch's and the group's.
	Connected   prometheus.Gauge
	Missing     *prometheus.GaugeVec
	Generations prometheus.Counter
	JoinFails   prometheus.Counter

	// The next input offset a partition reads, and the offset last
	// committed for it.
	Position, Committed *prometheus.GaugeVec
	// The chain a partition writes now: increments on its base, and
	// when the base was written.
	ChainIncrements, ChainBase *prometheus.GaugeVec
	// 1 for where the partition's state came from at its assignment,
	// 0 for the other sources.
	RestoreSource *prometheus.GaugeVec
}

// New creates the dedup_ families and registers them on reg. It
// panics if reg already holds one of them, as prometheus.MustRegister does:
// that is a wiring mistake, not a runtime condition.
func New(reg prometheus.Registerer) *Metrics {
	pt := []string{"topic", "partition"}
	ptg := []string{"topic", "partition", "generation"}
	r := registrar{reg}
	m := &Metrics{
		Messages:             r.counterVec("dedup_messages_total", "Input records by outcome: forwarded, duplicate, retraction, unkeyed; dead_lettered and refused for records the output cannot take (too large), written to DEAD_LETTER_TOPIC or skipped.", []string{"topic", "partition", "outcome"}),
		UnkeyedReasons:       r.counterVec("dedup_unkeyed_total", "Input records forwarded without a dedup key (outcome unkeyed), by reason: empty (record key, value or header absent or empty), malformed (not one well-formed JSON document), missing_field (path absent, null, unset or empty), not_scalar (path holds a record, object, array, map or repeated field), not_framed (value not in the Schema Registry wire format), unknown_schema (the registry has no schema of the value's id: 40403), undecodable (the value does not decode under its schema, or the schema is of another format than DEDUP_KEY reads).", []string{"topic", "reason"}),
		ExpectedFalseDrops:   r.counterVec("dedup_expected_false_drops_total", "False drops expected so far: every key the filters did not hold adds the pair's estimated false-positive probability when it was tested (both generations). Beside dedup_messages_total{outcome=\"duplicate\"}: the share of the duplicates that were new records dropped by mistake; divided by rate(dedup_messages_total{outcome=\"forwarded\"}), the false-drop rate DEDUP_FP_RATE promises to stay under.", pt),
		KeyWaiting:           r.gaugeVec("dedup_key_waiting", "1 while the partition's next record waits for its schema from the schema registry (unreachable, failing or refusing the credentials): it and the records behind it are held, none is forwarded unkeyed.", pt),
		DroppedWritten:       r.counterVec("dedup_dropped_written_total", "Input records dropped as duplicates and written to DROPPED_TOPIC (queued to its writer; the commit waits for their acknowledgement). With DROPPED_SAMPLE_RATE 1 it follows dedup_messages_total{outcome=\"duplicate\"} less dedup_dropped_skipped_total.", pt),
		DroppedSkipped:       r.counterVec("dedup_dropped_skipped_total", "Duplicates not written to DROPPED_TOPIC, by reason: sampled_out (left out by DROPPED_SAMPLE_RATE, by the dedup key's hash), refused (larger than the drop topic's max.message.bytes or PRODUCE_BATCH_BYTES, or keyless for a compacted drop topic; logged), replayed (a replay after a restore found it in the drop topic already).", []string{"topic", "partition", "reason"}),
		ReplaySuppressed:     r.counterVec("dedup_replay_suppressed_total", "Replayed input records whose output was already in the output topic, not forwarded again.", pt),
		RepartitionResent:    r.counterVec("dedup_repartition_resends_dropped_total", "Records of the repartition topic dropped as re-sends of the re-key hop: their origin offset was at or below the highest one the partition had taken from that input partition.", pt),
		RepartitionUnmarked:  r.counterVec("dedup_repartition_unmarked_total", "Records of the repartition topic whose value does not end in a (well-formed) origin trailer, decided as records of their own: not written by the re-key hop.", pt),
		RepartitionControl:   r.counterVec("dedup_repartition_control_records_total", "Records of the repartition topic that copy no input record, by kind: reset (the re-key hop's input partition went back; the partition's high-water marks of it lowered to where the re-key hop reads on), unknown (a record with origin trailer flags this build does not know, written by a newer re-key hop: the partition stops at it, neither forwarding nor skipping it, until hop 2 is upgraded; counted once per stop).", []string{"topic", "partition", "kind"}),
		RepartitionRekeyed:   r.counterVec("dedup_repartition_rekeyed_total", "Input records the re-key hop sent to the repartition topic and had acknowledged (re-sends included).", pt),
		RepartitionRestarts:  r.counterVec("dedup_repartition_restarts_total", "Batches of the re-key hop that failed (an error or an unknown outcome), each followed by a re-send from the first input record not acknowledged.", pt),
		RepartitionInputLag:  r.gaugeVec("dedup_repartition_input_lag", "Input records the re-key hop has not yet had acknowledged by the repartition topic, per input partition.", pt),
		RepartitionUnhealthy: r.gauge("dedup_repartition_unhealthy", "1 while the re-key hop (REPARTITION_TOPIC) is unhealthy and /healthz fails: an input partition's batches have failed for longer than PRODUCE_RECOVERY_TIMEOUT, or the hop stopped on an error; else 0."),
		TimestampAnomalies:   r.counterVec("dedup_timestamp_anomalies_total", "Input records decided without moving event time, by kind: future (stamped further ahead of the wall clock than DEDUP_MAX_CLOCK_SKEW), missing (no timestamp: 0 or negative).", []string{"topic", "partition", "kind"}),
		TimestampRewritten:   r.counterVec("dedup_timestamp_rewritten_total", "Forwarded records read without a timestamp (0 or negative), written with timestamp -1: the writer cannot write 0 or keep another negative value.", pt),
		Fill:                 r.gaugeVec("dedup_filter_fill_ratio", "Fraction of non-zero counters (counting), set bits (plain) or occupied slots (fingerprint) per filter generation.", ptg),
		EstimatedKeys:        r.gaugeVec("dedup_filter_estimated_keys", "Distinct keys estimated from the fill of each filter generation.", ptg),
		FPRate:               r.gaugeVec("dedup_filter_false_positive_rate", "Estimated current false-positive rate of each filter generation.", ptg),
		Saturated:            r.gaugeVec("dedup_filter_saturated_counters", "Counters stuck at their maximum (counting mode); such keys can no longer be removed.", ptg),
		FPTarget:             r.gauge("dedup_filter_false_positive_target", "Configured target false-positive rate (DEDUP_FP_RATE)."),
		ExpectedKeys:         r.gauge("dedup_filter_expected_keys", "Configured distinct keys per partition per window (DEDUP_EXPECTED_KEYS)."),
		WindowSeconds:        r.gauge("dedup_filter_window_seconds", "Configured window length (DEDUP_WINDOW)."),
		WindowElapsed:        r.gaugeVec("dedup_filter_window_elapsed_ratio", "Fraction of the current window elapsed, by the event time of the last record.", pt),
		FilterBytes:          r.gaugeVec("dedup_filter_bytes", "Memory held by both filter generations of a partition, with the tracking of the words they wrote (incremental checkpoints) and, while one is kept, the legacy pair.", pt),
		Rotations:            r.counterVec("dedup_rotations_total", "Filter rotations (window boundaries crossed by event time).", pt),
		Overflows:            r.counterVec("dedup_filter_overflow_total", "Keys the fingerprint filter's buckets refused, kept in the generation's exact stash instead (fingerprint mode; nothing is lost).", pt),
		EarlyRotations:       r.counterVec("dedup_filter_early_rotations_total", "Rotations forced by a full stash before the window ended (fingerprint mode): far more distinct keys than DEDUP_EXPECTED_KEYS.", pt),
		ForgottenKeys:        r.counterVec("dedup_filter_forgotten_keys_total", "Keys dropped from the filters by early rotations before their window ended: a later duplicate of one is forwarded again (no new record is dropped).", pt),
		Stashed:              r.gaugeVec("dedup_filter_stashed", "Fingerprints held in each generation's exact stash (fingerprint mode); the pair rotates early when a stash is full.", ptg),
		Lag:                  r.gaugeVec("dedup_consumer_lag", "Records between the last record read and the partition's high-water mark.", pt),
		Assigned:             r.gauge("dedup_assigned_partitions", "Input partitions currently assigned to this member: of the topic its group consumes (with REPARTITION_TOPIC, hop 2's repartition topic; with REPARTITION_HOPS=rekey, hop 1's input topic)."),
		MemPredicted:         r.gauge("dedup_memory_predicted_bytes", "Live memory this member predicts for itself from its assigned partitions: the model `dedup size` uses (filter pairs of the assigned partitions plus the spare, a fetch per partition, a batch per output partition, the runtime base). Compare with process_resident_memory_bytes."),
		ProduceErrors:        r.counterVec("dedup_produce_errors_total", "Output records the writer failed to deliver after its retries.", []string{"topic"}),
		OutputErrors:         r.counterVec("dedup_output_errors_total", "Failed produce requests by kind: retriable (not appended, retried), ambiguous (outcome unknown, resolved by reading the output back), refused (records the output cannot take: too large for the output topic's max.message.bytes or PRODUCE_BATCH_BYTES, found before writing or refused by the broker; other permanent refusals stop the partition).", []string{"kind"}),
		OutputTruncations:    r.counterVec("dedup_output_truncations_total", "Times an output partition was found truncated: an acknowledged produce got a base offset at or below one acknowledged before, the partition's end offset (read every 2 s) was at or below the last record acknowledged, or a restore found the partition's end below the end its checkpoint recorded. Records the stage wrote are gone (unclean leader election, or the topic deleted and created again); each is logged at error with the offsets. With DROPPED_TOPIC it also counts the drop topic, found the same ways. With REPARTITION_TOPIC it also counts hop 1's output, the repartition topic (found from hop 1's acknowledged produces, once per hop-1 input partition that wrote to the partition before and after).", []string{"topic", "partition"}),
		Stalled:              r.gauge("dedup_partitions_stalled", "Input partitions of this member stopped because the output topic refused one of their records for good."),
		// 1ms .. ~4.4min
		Latency: r.histogram("dedup_end_to_end_latency_seconds", "Output acknowledgement time minus input record timestamp.", prometheus.ExponentialBuckets(0.001, 4, 10)),
		// 1ms .. ~20s
		CheckpointSeconds: r.histogramVec("dedup_checkpoint_duration_seconds", "Time from the end-offset read to the durable save of a checkpoint.", prometheus.ExponentialBuckets(0.001, 3, 10), []string{"store"}),
		// 100µs .. ~5.9s: a copy of a few MB up to pairs of GBs.
		CheckpointPause: r.histogram("dedup_checkpoint_pause_seconds", "Time a partition's worker stops consuming for a periodic checkpoint: flush of its buffered outputs and copy of its filter pair into the spare.", prometheus.ExponentialBuckets(0.0001, 3, 11)),
		CheckpointSize:  r.gaugeVec("dedup_checkpoint_size_bytes", "Size of the last checkpoint: raw (uncompressed) and stored.", []string{"topic", "partition", "kind"}),
		CheckpointLast:  r.gaugeVec("dedup_checkpoint_last_success_timestamp_seconds", "Unix time of the last successful checkpoint; age = time() - this.", pt),
		Checkpoints:     r.counterVec("dedup_checkpoints_total", "Checkpoints saved and committed.", pt),
		CheckpointFails: r.counterVec("dedup_checkpoint_failures_total", "Checkpoints that failed (nothing was committed for them).", pt),
		Restores:        r.counterVec("dedup_restores_total", "Partition assignments by where the filter state came from: memory (kept from the previous generation), latest, fallback (snapshots of the store) or empty.", []string{"source"}),
		RestoreScanned:  r.counter("dedup_restore_scanned_records_total", "Output records read by the replay scans of restores from the store."),
		RestoreSeconds: r.histogramVec("dedup_restore_duration_seconds", "Time a restore from the checkpoint store took to load and decode a partition's chain: its base and the increments on it (the replay scan after it is not included).",
			prometheus.ExponentialBuckets(0.001, 3, 11), []string{"store"}),
		CheckpointWritten: r.counterVec("dedup_checkpoint_written_bytes_total", "Bytes the partition's checkpoints wrote to the store (as stored, compressed), by piece: base (the whole filter state) or increment (what changed since the previous piece). The checkpoint bandwidth is rate() of this.",
			[]string{"topic", "partition", "piece"}),
		CheckpointInstanceWritten: r.counterVec("dedup_checkpoint_instance_written_bytes_total", "Bytes every partition's checkpoints on this instance wrote to the store (as stored, compressed), by piece, as dedup_checkpoint_written_bytes_total counts them; never deleted when a partition moves, so rate() of it is the instance's checkpoint bandwidth, including the bases written just before a move.",
			[]string{"piece"}),
		CheckpointDamaged: r.counterVec("dedup_checkpoint_damaged_total", "Damaged snapshots of the partition found in the checkpoint store (checksum, truncation, format, missing chunk, or refused by decode), each logged at warn naming it; kept aside, never deleted.", pt),
		CheckpointMissing: r.counterVec("dedup_checkpoint_missing_total", "Starts of the partition that found no snapshot in the checkpoint store although the group had committed an offset for it: the store lost its state (checkpoint topic or directory deleted, emptied or changed). Each is logged at error; the partition starts with empty filters at the committed offset.", pt),
		InputTruncations:  r.counterVec("dedup_input_truncations_total", "Times the input partition's log was found ending below the offset the stage was to read next: truncated (unclean leader election) or the topic deleted and created again. Logged at error; the stage reads on from the log's end, at a partition's start or as soon as its reader finds it at runtime. With REPARTITION_TOPIC, hop 1 counts the input's here and hop 2 the repartition topic's.", pt),
		InputSkipped:      r.counterVec("dedup_input_skipped_offsets_total", "Input offsets the stage never read because they were below the partition's log start when it got there (deleted by retention or DeleteRecords while the stage was down or behind): their records were neither deduplicated nor forwarded.", pt),

		Connected:   r.gauge("dedup_broker_connected", "1 while the brokers answer the stage's metadata requests, 0 while none does."),
		Missing:     r.gaugeVec("dedup_topic_missing", "1 while a topic the stage needs (input, output, dead-letter or drop topic; with REPARTITION_HOPS=rekey input or repartition topic) named by the label does not exist; the stage waits for it, not ready.", []string{"topic"}),
		Generations: r.counter("dedup_group_generations_total", "Consumer-group generations this member joined; a steady rise without partition changes is a rebalance loop."),
		JoinFails:   r.counter("dedup_group_join_failures_total", "Attempts to join the consumer group that failed (coordinator errors, rejected joins); a member that keeps failing holds no partition."),

		Position:        r.gaugeVec("dedup_consumer_position", "The next input offset the partition reads: every record below it is decided.", pt),
		Committed:       r.gaugeVec("dedup_committed_offset", "The input offset last committed for the partition: by this member's checkpoints, or found at its assignment.", pt),
		ChainIncrements: r.gaugeVec("dedup_checkpoint_chain_increments", "Increments the partition's checkpoints wrote on their newest base; a restore reads the base and each of them.", pt),
		ChainBase:       r.gaugeVec("dedup_checkpoint_chain_base_timestamp_seconds", "Unix time the newest base of the partition's checkpoint chain was written.", pt),
		RestoreSource:   r.gaugeVec("dedup_restore_source", "1 for where the partition's filter state came from at its assignment (memory, latest, fallback, empty), 0 for the others.", []string{"topic", "partition", "source"}),
	}
	for _, s := range []string{string(partition.SourceMemory), "latest", "fallback", "empty"} {
		m.Restores.WithLabelValues(s)
	}
	for _, piece := range partition.PieceLabels {
		m.CheckpointInstanceWritten.WithLabelValues(piece)
	}
	for _, k := range []string{output.OutputRetriable, output.OutputAmbiguous, output.OutputRefused} {
		m.OutputErrors.WithLabelValues(k)
	}
	return m
}

// Forget deletes every series of input partition part of topic, so that
// a partition this member no longer owns leaves no stale values behind.
func (m *Metrics) Forget(topic string, part int) {
	l := prometheus.Labels{"topic": topic, "partition": strconv.Itoa(part)}
	for _, v := range []interface {
		DeletePartialMatch(prometheus.Labels) int
	}{
		m.Messages, m.DroppedWritten, m.DroppedSkipped, m.KeyWaiting, m.ExpectedFalseDrops, m.ReplaySuppressed, m.RepartitionResent, m.RepartitionUnmarked, m.RepartitionControl, m.TimestampAnomalies, m.TimestampRewritten, m.Fill, m.EstimatedKeys, m.FPRate,
		m.Saturated, m.WindowElapsed, m.FilterBytes, m.Rotations, m.Overflows, m.EarlyRotations,
		m.ForgottenKeys, m.Stashed, m.Lag, m.CheckpointSize,
		m.CheckpointLast, m.Checkpoints, m.CheckpointFails, m.InputSkipped, m.InputTruncations, m.CheckpointDamaged, m.CheckpointMissing, m.CheckpointWritten,
		m.Position, m.Committed, m.ChainIncrements, m.ChainBase, m.RestoreSource,
	} {
		v.DeletePartialMatch(l)
	}
}

// Reasons of dedup_dropped_skipped_total.
const (
	DroppedSampledOut = "sampled_out"
	DroppedRefused    = "refused"
	DroppedReplayed   = "replayed"
)

// Dropped adds the series of a partition writing DROPPED_TOPIC to pm.
func (m *Metrics) Dropped(pm *partition.Metrics, topic string, part int) {
	p := strconv.Itoa(part)
	pm.DroppedWritten = m.DroppedWritten.WithLabelValues(topic, p)
	pm.DroppedSampledOut = m.DroppedSkipped.WithLabelValues(topic, p, DroppedSampledOut)
	pm.DroppedRefused = m.DroppedSkipped.WithLabelValues(topic, p, DroppedRefused)
	pm.DroppedReplayed = m.DroppedSkipped.WithLabelValues(topic, p, DroppedReplayed)
}

// Repartitioned adds the series of a repartitioned partition (hop 2) to pm.
func (m *Metrics) Repartitioned(pm *partition.Metrics, topic string, part int) {
	p := strconv.Itoa(part)
	pm.RepartitionResent = m.RepartitionResent.WithLabelValues(topic, p)
	pm.RepartitionUnmarked = m.RepartitionUnmarked.WithLabelValues(topic, p)
	pm.RepartitionResets = m.RepartitionControl.WithLabelValues(topic, p, ControlReset)
	pm.RepartitionUnknown = m.RepartitionControl.WithLabelValues(topic, p, ControlUnknown)
}

// Partition returns one partition's series; storeKind labels its
// checkpoint durations.
func (m *Metrics) Partition(topic string, part int, storeKind string) *partition.Metrics {
	p := strconv.Itoa(part)
	pm := &partition.Metrics{
		Forwarded:          m.Messages.WithLabelValues(topic, p, OutcomeForwarded),
		Duplicate:          m.Messages.WithLabelValues(topic, p, OutcomeDuplicate),
		Retraction:         m.Messages.WithLabelValues(topic, p, OutcomeRetraction),
		Unkeyed:            m.Messages.WithLabelValues(topic, p, OutcomeUnkeyed),
		KeyWaiting:         m.KeyWaiting.WithLabelValues(topic, p),
		ExpectedFalseDrops: m.ExpectedFalseDrops.WithLabelValues(topic, p),
		Refused:            m.Messages.WithLabelValues(topic, p, OutcomeRefused),
		DeadLettered:       m.Messages.WithLabelValues(topic, p, OutcomeDeadLettered),
		ReplaySuppressed:   m.ReplaySuppressed.WithLabelValues(topic, p),
		WindowElapsed:      m.WindowElapsed.WithLabelValues(topic, p),
		Bytes:              m.FilterBytes.WithLabelValues(topic, p),
		Lag:                m.Lag.WithLabelValues(topic, p),
		Position:           m.Position.WithLabelValues(topic, p),
		Committed:          m.Committed.WithLabelValues(topic, p),
		Rotations:          m.Rotations.WithLabelValues(topic, p),
		Overflows:          m.Overflows.WithLabelValues(topic, p),
		EarlyRotations:     m.EarlyRotations.WithLabelValues(topic, p),
		ForgottenKeys:      m.ForgottenKeys.WithLabelValues(topic, p),
		CheckpointRaw:      m.CheckpointSize.WithLabelValues(topic, p, "raw"),
		CheckpointStored:   m.CheckpointSize.WithLabelValues(topic, p, "stored"),
		CheckpointLast:     m.CheckpointLast.WithLabelValues(topic, p),
		Checkpoints:        m.Checkpoints.WithLabelValues(topic, p),
		CheckpointFails:    m.CheckpointFails.WithLabelValues(topic, p),
		CheckpointPause:    m.CheckpointPause,
		Restores:           m.Restores,

		FutureTimestamps:    m.TimestampAnomalies.WithLabelValues(topic, p, AnomalyFuture),
		MissingTimestamps:   m.TimestampAnomalies.WithLabelValues(topic, p, AnomalyMissing),
		RewrittenTimestamps: m.TimestampRewritten.WithLabelValues(topic, p),
		RestoreScanned:      m.RestoreScanned,
		SkippedOffsets:      m.InputSkipped.WithLabelValues(topic, p),
		InputTruncations:    m.InputTruncations.WithLabelValues(topic, p),
		CheckpointDamaged:   m.CheckpointDamaged.WithLabelValues(topic, p),
		CheckpointMissing:   m.CheckpointMissing.WithLabelValues(topic, p),
		OutputTruncations:   m.OutputTruncations,
	}
	for i, s := range partition.Sources {
		pm.RestoreSource[i] = m.RestoreSource.WithLabelValues(topic, p, string(s))
	}
	for _, st := range key.Unkeyed {
		pm.UnkeyedBy[st] = m.UnkeyedReasons.WithLabelValues(topic, st.String())
	}
	if storeKind != "" { // without a store there are no checkpoints to time
		pm.CheckpointSeconds = m.CheckpointSeconds.WithLabelValues(storeKind)
		pm.RestoreSeconds = m.RestoreSeconds.WithLabelValues(storeKind)
		pm.ChainIncrements, pm.ChainBase = m.ChainIncrements.WithLabelValues(topic, p), m.ChainBase.WithLabelValues(topic, p)
		for i, piece := range partition.PieceLabels {
			pm.CheckpointWritten[i] = alsoCounting{m.CheckpointWritten.WithLabelValues(topic, p, piece), m.CheckpointInstanceWritten.WithLabelValues(piece)}
		}
	}
	for i, g := range []string{"current", "previous"} {
		pm.Fill[i] = m.Fill.WithLabelValues(topic, p, g)
		pm.EstKeys[i] = m.EstimatedKeys.WithLabelValues(topic, p, g)
		pm.FPRate[i] = m.FPRate.WithLabelValues(topic, p, g)
		pm.Saturated[i] = m.Saturated.WithLabelValues(topic, p, g)
		pm.Stashed[i] = m.Stashed.WithLabelValues(topic, p, g)
	}
	return pm
}

// registrar makes each family and registers it on reg at once.
type registrar struct{ reg prometheus.Registerer }

// alsoCounting is a partition's counter that adds to the instance's
// total too, which outlives the partition's series (Forget).
type alsoCounting struct {
	prometheus.Counter // the partition's series
	total              prometheus.Counter
}

func (c alsoCounting) Inc()          { c.Counter.Inc(); c.total.Inc() }
func (c alsoCounting) Add(v float64) { c.Counter.Add(v); c.total.Add(v) }

func (r registrar) counterVec(name, help string, labels []string) *prometheus.CounterVec {
	return register(r, prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels))
}

func (r registrar) gaugeVec(name, help string, labels []string) *prometheus.GaugeVec {
	return register(r, prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels))
}

func (r registrar) counter(name, help string) prometheus.Counter {
	return register(r, prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help}))
}

func (r registrar) gauge(name, help string) prometheus.Gauge {
	return register(r, prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help}))
}

func (r registrar) histogram(name, help string, buckets []float64) prometheus.Histogram {
	return register(r, prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}))
}

func (r registrar) histogramVec(name, help string, buckets []float64, labels []string) *prometheus.HistogramVec {
	return register(r, prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels))
}

func register[C prometheus.Collector](r registrar, c C) C {
	r.reg.MustRegister(c)
	return c
}
