package partition

import "log/slog"

// OffsetAttr is a log field for an offset, left out when off is one of
// Kafka's negative sentinels (nothing committed, "first", "last"): a
// field that is absent says "none" to people and machines alike, where
// -2 would have to be looked up.
func OffsetAttr(key string, off int64) slog.Attr {
	if off < 0 {
		return slog.Attr{}
	}
	return slog.Int64(key, off)
}
