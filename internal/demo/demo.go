package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"golang.org/x/sync/errgroup"
	"golang.org/x/term"

	"dedup/internal/config"
	"dedup/internal/service"
	"dedup/processor"
)

// Run starts the stage (service.Start with so), then runs it, the
// generator and the progress line together until ctx ends.
func Run(ctx context.Context, so service.Options, gopts Options) (err error) {
	cfg, stdout := so.Config, so.Stdout
	svc, err := service.Start(ctx, so)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, svc.Close()) }()
	stage := svc
	gopts.Brokers = svc.Conn().Brokers
	gopts.Transport = svc.Conn().Transport
	gen, err := New(gopts)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "Generating %d records/s into %s (%.0f%% duplicates, %.0f%% retractions, %.0f%% unkeyed); Ctrl-C to stop.\n",
		gopts.Rate, cfg.InputTopic, 100*gopts.DuplicateRate, 100*gopts.RetractRate, 100*gopts.UnkeyedRate)
	if page := svc.StatusPage(); page != "" {
		fmt.Fprintf(stdout, "Status page: %s\n", page)
	}

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return stage.Run(gctx) })
	g.Go(func() error { return gen.Run(gctx) })
	line := newProgressLine(stdout)
	started := time.Now()
	g.Go(func() error { line.run(gctx, stage.Progress, gen.Stats); return nil })
	err = g.Wait()
	fmt.Fprintln(stdout, summary(stage.Progress(), gen.Stats(), time.Since(started)))
	return err
}

// summary is the demo's last line: what was sent and what the stage did with it.
func summary(p processor.Progress, gen Stats, d time.Duration) string {
	dup := 0.0
	if p.In > 0 {
		dup = 100 * float64(p.Duplicates) / float64(p.In)
	}
	return fmt.Sprintf("demo summary: %s: sent %d records; the stage read %d, forwarded %d (%d first occurrences, %d retractions, %d unkeyed) and dropped %d duplicates (%.1f%%)",
		d.Round(time.Second), gen.Sent, p.In, forwarded(p), p.Forwarded, p.Retractions, p.Unkeyed, p.Duplicates, dup)
}

// GenerateOnly sends traffic to KAFKA_BROKERS and logs its rate.
func GenerateOnly(ctx context.Context, cfg *config.Config, gopts Options, log *slog.Logger) (err error) {
	conn, err := config.NewConnection(cfg, cfg.BrokerList())
	if err != nil {
		return err
	}
	defer conn.Transport.CloseIdleConnections()
	gopts.Brokers = conn.Brokers
	gopts.Transport = conn.Transport
	gen, err := New(gopts)
	if err != nil {
		return err
	}
	log.Info("generating traffic", "topic", cfg.InputTopic, "brokers", conn.Brokers, "rate", gopts.Rate,
		"dup", gopts.DuplicateRate, "retract", gopts.RetractRate, "unkeyed", gopts.UnkeyedRate)
	done := make(chan error, 1)
	go func() { done <- gen.Run(ctx) }()
	ticker := time.NewTicker(10 * time.Second)
	defer ticker.Stop()
	last, lastAt := gen.Stats(), time.Now()
	for {
		select {
		case err := <-done:
			s := gen.Stats()
			log.Info("generator stopped", "sent", s.Sent, "duplicates", s.Duplicates, "retractions", s.Retractions, "unkeyed", s.Unkeyed)
			return err
		case now := <-ticker.C:
			s := gen.Stats()
			log.Info("generator progress", "sent", s.Sent, "rate_per_s", rate(s.Sent-last.Sent, now.Sub(lastAt)),
				"duplicates", s.Duplicates, "retractions", s.Retractions, "unkeyed", s.Unkeyed)
			last, lastAt = s, now
		}
	}
}

func rate(n uint64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// defaultColumns is the width assumed for a terminal that does not say.
const defaultColumns = 80

// progressLine shows the stage at work: records in and out, the share
// dropped as duplicates, and throughput.
type progressLine struct {
	w       io.Writer
	redraw  bool // terminal: one line redrawn with \r twice a second
	columns func() int
}

// newProgressLine redraws one line on a terminal, fitted to its width
// (read at each redraw, so a resized window is followed); elsewhere (a log
// file, docker logs) the progress goes out as ordinary lines, less often.
func newProgressLine(w io.Writer) *progressLine {
	p := &progressLine{w: w}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		p.redraw = true
		p.columns = func() int {
			if width, _, err := term.GetSize(int(f.Fd())); err == nil && width > 0 {
				return width
			}
			return defaultColumns
		}
	}
	return p
}

func (p *progressLine) run(ctx context.Context, stage func() processor.Progress, gen func() Stats) {
	every := 500 * time.Millisecond
	if !p.redraw {
		every = 5 * time.Second
	}
	ticker := time.NewTicker(every)
	defer ticker.Stop()
	last, lastAt := stage(), time.Now()
	for {
		select {
		case <-ctx.Done():
			p.draw(stage(), last, gen(), time.Since(lastAt))
			if p.redraw {
				fmt.Fprintln(p.w)
			}
			return
		case now := <-ticker.C:
			cur := stage()
			p.draw(cur, last, gen(), now.Sub(lastAt))
			last, lastAt = cur, now
		}
	}
}

func (p *progressLine) draw(cur, last processor.Progress, gen Stats, d time.Duration) {
	dupRate := 0.0
	if cur.In > 0 {
		dupRate = 100 * float64(cur.Duplicates) / float64(cur.In)
	}
	out, lastOut := forwarded(cur), forwarded(last)
	inRate, outRate := rate(cur.In-last.In, d), rate(out-lastOut, d)
	text := fmt.Sprintf("sent %d | in %d | out %d | dropped %d (%.1f%%) | retractions %d | unkeyed %d | %.0f in/s, %.0f out/s",
		gen.Sent, cur.In, out, cur.Duplicates, dupRate, cur.Retractions, cur.Unkeyed, inRate, outRate)
	if !p.redraw {
		fmt.Fprintln(p.w, text)
		return
	}
	compact := fmt.Sprintf("in %d out %d drop %d (%.1f%%) retr %d unk %d %.0f/s",
		cur.In, out, cur.Duplicates, dupRate, cur.Retractions, cur.Unkeyed, inRate)
	// \033[K clears what a longer previous line left behind.
	fmt.Fprintf(p.w, "\r%s\033[K", fit(p.columns()-1, text, compact))
}

// fit returns the first of texts that fits in width columns, or the last
// one cut to width: a redrawn line that wraps is redrawn on a new line.
func fit(width int, texts ...string) string {
	for _, t := range texts {
		if len(t) <= width {
			return t
		}
	}
	last := texts[len(texts)-1]
	return last[:max(width, 0)]
}

// forwarded counts every record written to the output: first occurrences,
// retractions and unkeyed records alike.
func forwarded(p processor.Progress) uint64 { return p.Written() }
