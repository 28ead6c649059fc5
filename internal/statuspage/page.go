package statuspage

import (
	"bytes"
	"context"
	_ "embed"
	"html/template"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Defaults of Options.
const (
	DefaultEvery = 10 * time.Second
	DefaultSpan  = 10 * time.Minute
)

// Options configure a Page.
type Options struct {
	// Gatherer is the stage's registry: the one /metrics serves.
	Gatherer prometheus.Gatherer
	// Readiness is what /readyz answers (nil error: ready); nil leaves
	// readiness off the page.
	Readiness func() error
	// Probe is where the key probe answers GET ?key=... for a browser
	// that asked for the page with r: the action of the page's probe form
	// (ProbeOn). Nil, or empty for r: no form.
	Probe func(r *http.Request) string
	// KeyParts are the sources of a composite DEDUP_KEY, in order: the
	// probe form asks for each part (part=). Fewer than two: one key=.
	KeyParts []string
	// Every is how often the dedup rate's counters are sampled, Span how
	// far back the chart reaches (DefaultEvery, DefaultSpan when zero).
	Every, Span time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Page serves the status page and keeps the chart's samples.
type Page struct {
	o Options

	mu   sync.Mutex
	ring []sample // oldest first, at most o.Span/o.Every+1
}

// New returns the page for o; Run samples the counters for its chart.
func New(o Options) *Page {
	if o.Every <= 0 {
		o.Every = DefaultEvery
	}
	if o.Span <= 0 {
		o.Span = DefaultSpan
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Page{o: o}
}

// Run samples the counters now and every Every until ctx ends.
func (p *Page) Run(ctx context.Context) {
	t := time.NewTicker(p.o.Every)
	defer t.Stop()
	for {
		p.Sample(p.o.Now())
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Sample reads the dedup counters from the registry and keeps them as
// of at, dropping the oldest beyond Span. A registry that fails to
// gather still gives the families it could.
func (p *Page) Sample(at time.Time) {
	mfs, _ := p.o.Gatherer.Gather()
	s := sampleOf(at, families(mfs))
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ring = append(p.ring, s)
	keep := int(p.o.Span/p.o.Every) + 1
	if n := len(p.ring) - keep; n > 0 {
		p.ring = append(p.ring[:0], p.ring[n:]...)
	}
}

func (p *Page) samples() []sample {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]sample(nil), p.ring...)
}

//go:embed page.html
var pageHTML string

var pageTemplate = template.Must(template.New("page").Parse(pageHTML))

// policy is the page's Content-Security-Policy: a browser loads nothing
// from anywhere, runs no script, and submits the probe's form only to
// this origin or the probe's.
func policy(probe string) string {
	action := "'self'"
	if u, err := url.Parse(probe); err == nil && u.Scheme != "" && u.Host != "" {
		action += " " + u.Scheme + "://" + u.Host
	}
	return "default-src 'none'; style-src 'unsafe-inline'; form-action " + action + "; base-uri 'none'; frame-ancestors 'none'"
}

// ProbeOn is Options.Probe for a key probe listening on addr (host:port,
// another listener than the page's): /probe on the port of addr, at the
// host the browser reached the page by, since addr's host may be one
// every interface answers for.
func ProbeOn(addr string) func(r *http.Request) string {
	_, port, err := net.SplitHostPort(addr)
	if err != nil || addr == "" {
		return nil
	}
	return func(r *http.Request) string {
		host := r.Host
		if h, _, err := net.SplitHostPort(r.Host); err == nil {
			host = h
		}
		return (&url.URL{Scheme: "http", Host: net.JoinHostPort(host, port), Path: "/probe"}).String()
	}
}

// ServeHTTP renders the page from the registry as it is now.
func (p *Page) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now := p.o.Now()
	mfs, err := p.o.Gatherer.Gather()
	v := read(families(mfs), now)
	if err != nil {
		v.Errors = append(v.Errors, "gathering the metrics: "+err.Error())
	}
	if p.o.Readiness != nil {
		v.Readiness = readiness(p.o.Readiness())
	}
	if p.o.Probe != nil {
		v.Probe = p.o.Probe(r)
		if len(p.o.KeyParts) > 1 {
			v.KeyParts = p.o.KeyParts
		}
	}
	v.Chart = drawChart(p.samples(), now, p.o.Every, p.o.Span)
	var buf bytes.Buffer
	if err := pageTemplate.Execute(&buf, v); err != nil {
		http.Error(w, "render the status page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", policy(v.Probe))
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	_, _ = buf.WriteTo(w)
}
