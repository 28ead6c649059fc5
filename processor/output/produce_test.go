package output

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"

	"github.com/segmentio/kafka-go"
)

// TestClassifyProduce: which failures the writer may retry. Only what
// certainly appended nothing is retriable; a failure after the request
// was handed to a connection is ambiguous, whatever its error.
func TestClassifyProduce(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{opError("dial"), OutputRetriable},
		{kafka.BrokerNotAvailable, OutputRetriable},
		{opError("read"), OutputAmbiguous},
		{context.DeadlineExceeded, OutputAmbiguous},
		{errors.New("unexpected EOF"), OutputAmbiguous},
	} {
		if got, _ := classifyProduce(nil, tc.err); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.err, got, tc.want)
		}
	}
	for code, want := range map[kafka.Error]string{
		kafka.NotLeaderForPartition:        OutputRetriable,
		kafka.NotEnoughReplicas:            OutputRetriable,
		kafka.UnknownTopicOrPartition:      OutputRetriable,
		kafka.RequestTimedOut:              OutputAmbiguous,
		kafka.NotEnoughReplicasAfterAppend: OutputAmbiguous,
		kafka.KafkaStorageError:            OutputAmbiguous,
		kafka.Unknown:                      OutputAmbiguous,
		kafka.MessageSizeTooLarge:          OutputRefused,
		kafka.RecordListTooLarge:           OutputRefused,
		kafka.TopicAuthorizationFailed:     OutputRefused,
	} {
		if got := codeKind(code); got != want {
			t.Errorf("%v: %q, want %q", code, got, want)
		}
	}
	// kafka.Writer retries an error that unwraps to a temporary one: an
	// ambiguous OutputError must not.
	amb := &OutputError{Kind: OutputAmbiguous, Err: kafka.RequestTimedOut}
	var temp interface{ Temporary() bool }
	if errors.As(amb, &temp) && temp.Temporary() {
		t.Error("an ambiguous OutputError unwraps to a temporary error")
	}
	if !Refused(&ProduceError{Err: &OutputError{Kind: OutputRefused, Err: kafka.MessageSizeTooLarge}}) ||
		!Refused(&ProduceError{Err: &OutputError{Kind: OutputRetriable, Err: kafka.UnknownTopicOrPartition}}) ||
		Refused(&ProduceError{Err: amb}) {
		t.Error("refused misclassifies")
	}
}

// opError is the *net.OpError a connection reports for op, wrapped.
func opError(op string) error {
	return fmt.Errorf("wrapped: %w", &net.OpError{Op: op, Net: "tcp", Err: errors.New("connection refused")})
}
