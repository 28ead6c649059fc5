// Package statuspage is the stage's status page, served at / on the
// metrics listener: per partition its offsets and lag, records in,
// forwarded and dropped, the two filter generations, the checkpoint chain
// and where the state was restored from; the dedup rate of the last
// minutes as an inline SVG chart; the key probe's form when the probe is
// enabled. Plain HTML and CSS, no script, nothing loaded from elsewhere.
//
// Every figure is read from the stage's Prometheus registry at request
// time, the registry /metrics serves, so the page and /metrics cannot
// disagree. Each figure carries the family and labels it sums
// (data-metric, data-match) and the value (data-value), for tests and
// for anyone checking the page against /metrics. The chart's samples are
// the only state: the counters of dedup_messages_total, read every 10 s
// into a ring of 10 minutes.
//
// Files: page.go (Options, Page: the handler, the sampler); figures.go
// (the families read into the page's figures); chart.go (the ring of
// samples and the chart's geometry); page.html (the template and its CSS).
//
// Concurrency: a Page is safe for concurrent use.
package statuspage
