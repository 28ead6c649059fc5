package demo

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"dedup/processor"
)

func TestProgressLineFitsTheTerminal(t *testing.T) {
	big := processor.Progress{In: 123456789012, Forwarded: 98765432109, Duplicates: 24691356903, Retractions: 1234567, Unkeyed: 7654321}
	for _, width := range []int{defaultColumns, 60, 132, 20} {
		var out bytes.Buffer
		p := &progressLine{w: &out, redraw: true, columns: func() int { return width }}
		p.draw(big, processor.Progress{}, Stats{Sent: 123456789999}, time.Second)
		line := strings.TrimSuffix(strings.TrimPrefix(out.String(), "\r"), "\033[K")
		if len(line) > width-1 {
			t.Errorf("width %d: %d columns: %q", width, len(line), line)
		}
		if width >= 60 && !strings.Contains(line, "drop 24691356903") && !strings.Contains(line, "dropped 24691356903") {
			t.Errorf("width %d: the dropped count is lost: %q", width, line)
		}
	}
}
