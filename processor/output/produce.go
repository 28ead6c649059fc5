package output

import (
	"context"
	"dedup/processor/cluster"
	"errors"
	"fmt"
	"net"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	produceAPI "github.com/segmentio/kafka-go/protocol/produce"
	rawproduceAPI "github.com/segmentio/kafka-go/protocol/rawproduce"
)

// Kinds of failed produce requests, the values of
// dedup_output_errors_total{kind}. docs/delivery.md gives the argument.
const (
	// OutputRetriable: the records were certainly not appended (no
	// connection to the leader, or the broker said so before appending:
	// NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS, ...). The writer may send
	// them again as they are.
	OutputRetriable = "retriable"
	// OutputAmbiguous: the request may or may not have been appended (the
	// connection failed after it was handed over, a timeout,
	// REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS_AFTER_APPEND, an error code not
	// known to be answered before the append). It is never sent again: the
	// generation ends and the restore's replay scan reads back which records
	// landed.
	OutputAmbiguous = "ambiguous"
	// OutputRefused: the broker refuses the records for good
	// (MESSAGE_TOO_LARGE, an authorization failure, ...), or the size check
	// refused a record before writing it. A refusal of the records
	// themselves (RecordRefused) ends the generation, and the partitions
	// write their next outputs alone to name the record; any other stops
	// the input partitions they came from
	// (the group runner reports it unhealthy) until the cause is fixed and the partition
	// is assigned again.
	OutputRefused = "refused"
)

var (
	// ErrAmbiguous is what an ambiguous OutputError unwraps to.
	ErrAmbiguous = errors.New("produce outcome unknown")
	// ErrRefused is what a refused OutputError unwraps to, with its cause.
	ErrRefused = errors.New("output refused the records")
	// ErrOutputRefused is what Healthy reports (wrapped, with the
	// *ProduceError) while input partitions are stopped by a refusal.
	ErrOutputRefused = errors.New("output refused a record: partition stopped")
)

// OutputError is a failed produce request of the writer, classified.
type OutputError struct {
	Kind      string // OutputRetriable, OutputAmbiguous or OutputRefused
	Topic     string // output topic
	Partition int    // output partition
	Err       error  // the failure as the transport or the broker reported it
}

func (e *OutputError) Error() string {
	return fmt.Sprintf("produce to %s/%d (%s): %v", e.Topic, e.Partition, e.Kind, e.Err)
}

// Unwrap hides the cause of an ambiguous failure: kafka.Writer retries a
// batch whose error unwraps to a temporary or a network error, and an
// ambiguous request must not be sent twice.
func (e *OutputError) Unwrap() []error {
	switch e.Kind {
	case OutputAmbiguous:
		return []error{ErrAmbiguous}
	case OutputRefused:
		return []error{ErrRefused, e.Err}
	}
	return []error{e.Err}
}

// outcomes is the writer's transport below the metadata cache: it
// classifies the outcome of every produce request and returns every failure
// as an *OutputError, so that kafka.Writer (which retries a batch whose
// error is temporary or a network error, whatever happened to the first
// copy) retries only what was certainly not appended. An ambiguous outcome
// (or a refusal of the records themselves) also aborts the output at
// once, so that no later batch of the same output partition lands ahead of
// the records being resolved.
type outcomes struct {
	next   kafka.RoundTripper
	abort  func()
	counts map[string]prometheus.Counter // by kind
	// truncated checks the base offsets of acknowledged requests (nil:
	// not checked).
	truncated *cluster.Truncations
	// droppedTruncated is the same of the drop topic (nil: none).
	droppedTruncated *cluster.Truncations
	// dropped is the drop topic (Config.DroppedTopic), whose refused
	// records stop their partitions instead of aborting the writer.
	dropped string
	// blind passes produce outcomes to kafka.Writer unclassified: its own
	// retries, which can append a batch twice. Only the produce-path
	// benchmark sets it, as the reference.
	blind bool
}

func newOutcomes(next kafka.RoundTripper, c *Config, abort func()) *outcomes {
	o := &outcomes{next: next, abort: abort, counts: map[string]prometheus.Counter{}, truncated: c.truncated,
		droppedTruncated: c.droppedTruncated, dropped: c.DroppedTopic}
	for _, k := range []string{OutputRetriable, OutputAmbiguous, OutputRefused} {
		o.counts[k] = c.OutputErrors.WithLabelValues(k)
	}
	return o
}

func (o *outcomes) RoundTrip(ctx context.Context, addr net.Addr, req kafka.Request) (kafka.Response, error) {
	if !isProduce(req) || o.blind {
		return o.next.RoundTrip(ctx, addr, req)
	}
	var res kafka.Response
	var err error
	if pr, ok := req.(*produceAPI.Request); ok {
		res, err = o.send(ctx, addr, pr)
	} else {
		res, err = o.next.RoundTrip(ctx, addr, req)
	}
	kind, cause := classifyProduce(res, err)
	if kind == "" {
		if r, ok := res.(*produceAPI.Response); ok {
			acked(o.truncated, r)
			acked(o.droppedTruncated, r)
		}
		return res, nil
	}
	o.counts[kind].Inc()
	oe := &OutputError{Kind: kind, Err: cause}
	oe.Topic, oe.Partition = produced(req)
	// An ambiguous outcome, or the broker refusing the records themselves,
	// ends the generation: aborting at once keeps the later batches of the
	// same output partition, which kafka-go sends once a failed one is
	// given up, from landing ahead of the records being resolved. Refused
	// drops stop their input partitions instead (Failures.Failed): no
	// order of the drop topic waits on them, and writing them again would
	// be refused again.
	if kind == OutputAmbiguous || (kind == OutputRefused && RecordRefused(cause) && (o.dropped == "" || oe.Topic != o.dropped)) {
		o.abort()
	}
	return nil, oe
}

// isProduce reports whether req is a produce request: kafka.Writer's, or
// a raw one (rawProduce's, the drop writer's).
func isProduce(req kafka.Request) bool {
	switch req.(type) {
	case *produceAPI.Request, *rawproduceAPI.Request:
		return true
	}
	return false
}

// produced is the topic and partition a produce request writes (its first
// ones; -1: none).
func produced(req kafka.Request) (topic string, partition int) {
	switch r := req.(type) {
	case *produceAPI.Request:
		if len(r.Topics) > 0 && len(r.Topics[0].Partitions) > 0 {
			return r.Topics[0].Topic, int(r.Topics[0].Partitions[0].Partition)
		} else if len(r.Topics) > 0 {
			return r.Topics[0].Topic, -1
		}
	case *rawproduceAPI.Request:
		if len(r.Topics) > 0 && len(r.Topics[0].Partitions) > 0 {
			return r.Topics[0].Topic, int(r.Topics[0].Partitions[0].Partition)
		} else if len(r.Topics) > 0 {
			return r.Topics[0].Topic, -1
		}
	}
	return "", -1
}

// send sends pr, its records encoded by rawProduce when it can.
func (o *outcomes) send(ctx context.Context, addr net.Addr, pr *produceAPI.Request) (kafka.Response, error) {
	raw, rb, ok, err := rawProduce(pr)
	if err != nil {
		return nil, fmt.Errorf("encode records: %w", err)
	}
	if !ok {
		return o.next.RoundTrip(ctx, addr, pr)
	}
	res, err := o.next.RoundTrip(ctx, addr, raw)
	if err == nil {
		rb.release()
	}
	return res, err
}

// classifyProduce returns the kind of a produce round trip's failure and
// its cause, or "" when every partition of the response succeeded.
func classifyProduce(res kafka.Response, err error) (kind string, cause error) {
	if err != nil {
		return failureKind(err), err
	}
	r, ok := res.(*produceAPI.Response)
	if !ok {
		return "", nil // acks=0: no response (the stage always asks for acks=all)
	}
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				e := kafka.Error(p.ErrorCode)
				return codeKind(e), e
			}
		}
	}
	return "", nil
}

// failureKind classifies a round trip that returned no response. Only
// failures that happen before the request is handed to a connection are
// certain: the dial, and the routing of the request to the partition's
// leader. Everything after (a closed or reset connection, an I/O or
// context timeout, a failed read of the response) may come after the
// broker read and appended the request.
func failureKind(err error) string {
	var op *net.OpError
	var route *produceAPI.Error
	var rawRoute *rawproduceAPI.Error // the same, of a request rawProduce encoded
	switch {
	case errors.As(err, &op) && op.Op == "dial",
		errors.As(err, &route), errors.As(err, &rawRoute),
		errors.Is(err, kafka.BrokerNotAvailable):
		return OutputRetriable
	}
	return OutputAmbiguous
}

// codeKind classifies a produce response's error code. Retriable codes
// are answered before the append; refused ones are answered before the
// append and would be answered again. Any other code, including those a
// broker answers after appending (REQUEST_TIMED_OUT,
// NOT_ENOUGH_REPLICAS_AFTER_APPEND) and codes this list does not know, is
// ambiguous.
func codeKind(e kafka.Error) string {
	switch e {
	case kafka.NotLeaderForPartition, kafka.LeaderNotAvailable, kafka.NotEnoughReplicas,
		kafka.InvalidMessage, // CORRUPT_MESSAGE: the checksum failed on receipt
		kafka.FencedLeaderEpoch, kafka.UnknownLeaderEpoch, kafka.BrokerNotAvailable,
		kafka.ReplicaNotAvailable, kafka.ThrottlingQuotaExceeded,
		// Retried by kafka.Writer, and refused when it persists (refused).
		kafka.UnknownTopicOrPartition:
		return OutputRetriable
	case kafka.MessageSizeTooLarge, kafka.RecordListTooLarge, kafka.InvalidMessageSize,
		kafka.InvalidTopic, kafka.TopicAuthorizationFailed, kafka.ClusterAuthorizationFailed,
		kafka.InvalidRecord, kafka.InvalidTimestamp, kafka.UnsupportedForMessageFormat,
		kafka.UnsupportedCompressionType, kafka.InvalidRequiredAcks, kafka.PolicyViolation:
		return OutputRefused
	}
	return OutputAmbiguous
}

// Refused reports whether a produce failure is permanent: the broker
// refused the records for good, a topic stayed unknown through the
// writer's retries (deleted), or a record is larger than the writer's
// batch limit.
func Refused(err error) bool {
	var tooLarge kafka.MessageTooLargeError
	return errors.Is(err, ErrRefused) || errors.Is(err, kafka.UnknownTopicOrPartition) ||
		errors.As(err, &tooLarge)
}

// RecordRefused reports whether a produce failure is a refusal of the
// records themselves (too large, invalid, corrupt after the writer's
// retries), rather than of the topic or the principal: one record of the
// batch may be the cause, which writing them alone finds (probe.go).
func RecordRefused(err error) bool {
	for _, e := range []error{kafka.MessageSizeTooLarge, kafka.RecordListTooLarge, kafka.InvalidMessageSize,
		kafka.InvalidRecord, kafka.InvalidMessage} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// acked checks the base offsets of a successful produce response's
// partitions of the tracker's topic (dedup_output_truncations_total).
func acked(t *cluster.Truncations, r *produceAPI.Response) {
	if t == nil {
		return
	}
	for _, rt := range r.Topics {
		if rt.Topic != t.Topic() {
			continue
		}
		for _, p := range rt.Partitions {
			t.Acked(p.Partition, p.BaseOffset)
		}
	}
}
