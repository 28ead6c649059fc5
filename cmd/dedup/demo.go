package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"golang.org/x/sync/errgroup"
	"golang.org/x/term"

	"dedup/processor"
)

// demoFlags are the generator's knobs; the rest of the configuration comes
// from the environment as for `dedup run`.
type demoFlags struct {
	generateOnly bool
	duration     time.Duration
	gen          GeneratorOptions
}

// newDemoFlagSet defines `dedup demo`'s flags into f, for parsing and for
// its usage.
func newDemoFlagSet(f *demoFlags) *flag.FlagSet {
	fs := flag.NewFlagSet("dedup demo", flag.ContinueOnError)
	fs.BoolVar(&f.generateOnly, "generate-only", false, "only generate traffic (needs KAFKA_BROKERS)")
	fs.DurationVar(&f.duration, "duration", 0, "stop after this long (0 = until SIGTERM/SIGINT)")
	fs.IntVar(&f.gen.Rate, "rate", 500, "records per second")
	fs.IntVar(&f.gen.Keys, "keys", 0, "distinct keys before fresh keys repeat (0 = never repeat)")
	fs.Float64Var(&f.gen.DuplicateRate, "dup", 0.3, "fraction of records that resend a recent record")
	fs.Float64Var(&f.gen.RetractRate, "retract", 0.02, "fraction of records that retract a recent key")
	fs.Float64Var(&f.gen.UnkeyedRate, "unkeyed", 0.02, "fraction of records without a key")
	fs.IntVar(&f.gen.Count, "count", 0, "stop generating after this many records (0 = no limit)")
	fs.IntVar(&f.gen.ValueSize, "value-size", 64, "filler bytes per value")
	fs.Uint64Var(&f.gen.Seed, "seed", 1, "random seed (same seed, same traffic)")
	return fs
}

func parseDemoFlags(args []string, stderr io.Writer) (demoFlags, error) {
	var f demoFlags
	fs := newDemoFlagSet(&f)
	fs.SetOutput(stderr)
	fs.Usage = func() { printCommandUsage(fs.Output(), commandNamed("demo")) }
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	if fs.NArg() > 0 {
		return f, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if f.duration < 0 {
		return f, fmt.Errorf("--duration must be >= 0, got %s", f.duration)
	}
	return f, nil
}

// runDemo is `dedup demo`.
func runDemo(ctx context.Context, args []string, lookup LookupFunc, stdout, stderr io.Writer) int {
	flags, err := parseDemoFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "dedup demo: %v\n", err)
		return exitConfig
	}
	// The progress line shares the terminal with the logs: unless asked
	// otherwise, the demo logs warnings only.
	if _, set := lookup("LOG_LEVEL"); !set && !flags.generateOnly {
		lookup = withDefault(lookup, "LOG_LEVEL", "warn")
	}
	cfg, log, code := setup(lookup, stderr)
	if code != exitOK {
		return code
	}
	if flags.generateOnly && cfg.Embedded() {
		reportConfigError(stderr, &ConfigError{Problems: []Problem{{Var: "KAFKA_BROKERS", Msg: "dedup demo --generate-only needs brokers to send to"}}})
		return exitConfig
	}
	flags.gen.Topic = cfg.InputTopic
	flags.gen.RetractHeader = cfg.RetractHeader
	flags.gen.Logger = log
	if _, err := NewGenerator(flags.gen); err != nil {
		fmt.Fprintf(stderr, "dedup demo: %v\n", err)
		return exitConfig
	}
	if flags.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, flags.duration)
		defer cancel()
	}
	if flags.generateOnly {
		err = generateOnly(ctx, cfg, flags.gen, log)
	} else {
		err = demo(ctx, cfg, flags.gen, log, stdout)
	}
	if err != nil {
		log.Error("dedup demo failed", "err", err)
		return exitFailure
	}
	return exitOK
}

// withDefault answers name with value when the environment does not set it.
func withDefault(lookup LookupFunc, name, value string) LookupFunc {
	return func(k string) (string, bool) {
		if v, ok := lookup(k); ok || k != name {
			return v, ok
		}
		return value, true
	}
}

// demo runs the stage, the generator and the progress line together.
func demo(ctx context.Context, cfg *Config, gopts GeneratorOptions, log *slog.Logger, stdout io.Writer) (err error) {
	svc, err := startService(ctx, cfg, log, stdout)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, svc.Close()) }()
	stage := svc.Stage
	gopts.Brokers = svc.Cluster.Conn.Brokers
	gopts.Transport = svc.Cluster.Conn.Transport
	gen, err := NewGenerator(gopts)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "Generating %d records/s into %s (%.0f%% duplicates, %.0f%% retractions, %.0f%% unkeyed); Ctrl-C to stop.\n",
		gopts.Rate, cfg.InputTopic, 100*gopts.DuplicateRate, 100*gopts.RetractRate, 100*gopts.UnkeyedRate)

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
func summary(p processor.Progress, gen GeneratorStats, d time.Duration) string {
	dup := 0.0
	if p.In > 0 {
		dup = 100 * float64(p.Duplicates) / float64(p.In)
	}
	return fmt.Sprintf("demo summary: %s: sent %d records; the stage read %d, forwarded %d (%d first occurrences, %d retractions, %d unkeyed) and dropped %d duplicates (%.1f%%)",
		d.Round(time.Second), gen.Sent, p.In, forwarded(p), p.Forwarded, p.Retractions, p.Unkeyed, p.Duplicates, dup)
}

// generateOnly sends traffic to KAFKA_BROKERS and logs its rate.
func generateOnly(ctx context.Context, cfg *Config, gopts GeneratorOptions, log *slog.Logger) (err error) {
	conn, err := newConnection(cfg, cfg.BrokerList())
	if err != nil {
		return err
	}
	defer conn.Transport.CloseIdleConnections()
	gopts.Brokers = conn.Brokers
	gopts.Transport = conn.Transport
	gen, err := NewGenerator(gopts)
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

func (p *progressLine) run(ctx context.Context, stage func() processor.Progress, gen func() GeneratorStats) {
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

func (p *progressLine) draw(cur, last processor.Progress, gen GeneratorStats, d time.Duration) {
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
