package processor

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// kafkaLogger adapts kafka-go's Printf logger to slog. kafka-go reports
// retried, transient conditions through its error logger too, so they go
// to Debug; what matters surfaces as errors returned to the processor.
type kafkaLogger struct{ log *slog.Logger }

func (l kafkaLogger) Printf(format string, args ...any) {
	l.log.Debug(fmt.Sprintf(format, args...))
}
