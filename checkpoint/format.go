package checkpoint

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"

	"dedup/internal/buildinfo"
)

// unknownField names the first field of the JSON document b that T does
// not hold ("" when none, or when b does not decode at all): b was
// written by a newer release, and json.Unmarshal into a T reads the rest
// of it as before.
func unknownField[T any](b []byte) string {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var v T
	err := dec.Decode(&v)
	if err == nil {
		return ""
	}
	// encoding/json has no typed error for it.
	name, ok := strings.CutPrefix(err.Error(), "json: unknown field ")
	if !ok {
		return ""
	}
	return strings.Trim(name, `"`)
}

// formatNotes says, once per store and kind of finding, that the store
// holds what this release does not read (a newer release's pieces,
// fields or files), naming the release that wrote it when recorded.
// What it does not read it ignores: restores fall back as for any piece
// they cannot use.
type formatNotes struct {
	mu   sync.Mutex
	seen map[string]bool
}

func (n *formatNotes) note(log *slog.Logger, found, writer, where string) {
	n.mu.Lock()
	k := found + "\x00" + writer
	seen := n.seen[k]
	if n.seen == nil {
		n.seen = map[string]bool{}
	}
	n.seen[k] = true
	n.mu.Unlock()
	if seen {
		return
	}
	if writer == "" {
		writer = "not recorded"
	}
	log.Warn("checkpoint store holds a format newer than this release: what it does not read is ignored",
		"release", buildinfo.Version, "written_by", writer, "found", found, "where", where)
}
