package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/segmentio/kafka-go"
)

// defaultDial is kafka.DefaultTransport's dialer.
var defaultDial = (&net.Dialer{Timeout: 3 * time.Second}).DialContext

// DefaultDial is the dialer a transport without its own uses.
func DefaultDial(ctx context.Context, network, address string) (net.Conn, error) {
	return defaultDial(ctx, network, address)
}

// NewTransport returns a transport with t's settings (TLS, SASL, dialer,
// ...) but its own connection pool. kafka.Transport keeps pooled
// connections to a restarted broker and hands them out after it is back
// (every writer attempt then fails with "unexpected EOF"); a transport per
// writer, dropped with it, starts from fresh connections. Exported fields
// only: the pool is unexported state that must not be copied. A nil t
// gives kafka.DefaultTransport's settings.
func NewTransport(t *kafka.Transport) *kafka.Transport {
	if t == nil {
		return &kafka.Transport{Dial: defaultDial}
	}
	return &kafka.Transport{
		Dial:           t.Dial,
		DialTimeout:    t.DialTimeout,
		IdleTimeout:    t.IdleTimeout,
		MetadataTTL:    t.MetadataTTL,
		MetadataTopics: t.MetadataTopics,
		ClientID:       t.ClientID,
		TLS:            t.TLS,
		SASL:           t.SASL,
		Resolver:       t.Resolver,
		Context:        t.Context,
	}
}

// Sleep waits for d or until ctx ends.
func Sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// Every calls f every interval until ctx ends or f returns false.
func Every(ctx context.Context, interval time.Duration, f func() bool) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if !f() {
				return
			}
		}
	}
}

// Logger adapts kafka-go's Printf logger to slog. kafka-go reports
// retried, transient conditions through its error logger too, so they go
// to Debug; what matters surfaces as errors returned to the processor.
type Logger struct{ Log *slog.Logger }

func (l Logger) Printf(format string, args ...any) {
	l.Log.Debug(fmt.Sprintf(format, args...))
}
