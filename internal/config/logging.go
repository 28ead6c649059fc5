package config

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// parseLevel reads LOG_LEVEL.
func parseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("must be debug, info, warn or error, got %q", s)
}

// newLogger builds the structured logger from LOG_LEVEL and LOG_FORMAT;
// the configuration has been validated, so unknown values cannot reach here.
func NewLogger(cfg *Config, w io.Writer) *slog.Logger {
	level, _ := parseLevel(cfg.LogLevel)
	opts := &slog.HandlerOptions{Level: level, ReplaceAttr: durationInSeconds}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// durationInSeconds writes a duration field k as k_seconds, a number of
// seconds: slog would write nanoseconds in JSON and Go's "1m30s" in text;
// one unit, named in the field, reads the same to people and machines in
// both formats.
func durationInSeconds(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() != slog.KindDuration {
		return a
	}
	key := a.Key
	if !strings.HasSuffix(key, "_seconds") {
		key += "_seconds"
	}
	return slog.Float64(key, a.Value.Duration().Seconds())
}
