package bench

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// bar draws one progress bar on a terminal, redrawn in place with \r. On
// anything but a terminal it prints only the final line, so logs stay short.
type bar struct {
	mu    sync.Mutex
	w     io.Writer
	tty   bool
	label string
	total uint64
	start time.Time
	n     uint64
	last  time.Time
}

func newBar(w io.Writer, label string, total uint64) *bar {
	f, ok := w.(*os.File)
	tty := false
	if ok {
		if st, err := f.Stat(); err == nil {
			tty = st.Mode()&os.ModeCharDevice != 0
		}
	}
	return &bar{w: w, tty: tty, label: label, total: total, start: time.Now()}
}

const barWidth = 30

// clearLine erases from the cursor to the end of the line (ANSI), so a
// shorter redraw leaves nothing of a longer one behind.
const clearLine = "\x1b[K"

func (b *bar) line(suffix string) string {
	frac := 1.0
	if b.total > 0 {
		frac = min(1, float64(b.n)/float64(b.total))
	}
	filled := int(frac * barWidth)
	return fmt.Sprintf("%-16s [%s%s] %3.0f%% %s/%s %s", b.label,
		strings.Repeat("#", filled), strings.Repeat(".", barWidth-filled),
		100*frac, count(float64(b.n)), count(float64(b.total)), suffix)
}

// update records progress n and redraws at most every 100ms.
func (b *bar) update(n uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.n = n
	if !b.tty || time.Since(b.last) < 100*time.Millisecond {
		return
	}
	b.last = time.Now()
	rate := float64(n) / time.Since(b.start).Seconds()
	fmt.Fprintf(b.w, "\r%s %s/s%s", b.line(""), count(rate), clearLine)
}

// follow updates the bar from get until the returned stop is called.
func (b *bar) follow(get func() uint64) (stop func()) {
	done := make(chan struct{})
	var once sync.Once
	go func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				b.update(get())
			}
		}
	}()
	return func() { once.Do(func() { close(done) }) }
}

// finish draws the final line with suffix.
func (b *bar) finish(suffix string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.n = b.total
	prefix, clear := "", ""
	if b.tty {
		prefix, clear = "\r", clearLine
	}
	if suffix == "" {
		suffix = fmt.Sprintf("in %.1fs", time.Since(b.start).Seconds())
	}
	fmt.Fprintf(b.w, "%s%s %s%s\n", prefix, b.line(""), suffix, clear)
}

func (b *bar) done(r Result) {
	b.finish(fmt.Sprintf("%s rec/s", count(r.RecordsPerSecond())))
}

func (b *bar) fail() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.tty {
		fmt.Fprint(b.w, "\r")
	}
	fmt.Fprintf(b.w, "%s failed\n", b.line(""))
}

// count formats n with a k/M/G suffix.
func count(n float64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.2fG", n/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.2fM", n/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1fk", n/1e3)
	}
	return fmt.Sprintf("%.0f", n)
}
