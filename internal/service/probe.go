package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"dedup/internal/explain"
	"dedup/key"
	"dedup/processor"
)

// keyProbe serves GET /probe on PROBE_ADDR: what this member's live
// filters say of a dedup key, asked of each partition's worker
// (processor.AskKey), never adding it. It has a listener of its own, off
// by default, because its answers say which keys were seen: it is bound
// where only operators reach it, apart from the metrics Prometheus scrapes.
type keyProbe struct {
	ln   net.Listener
	srv  *http.Server
	log  *slog.Logger
	keys key.Source
	// repartitioned: the partitions asked are REPARTITION_TOPIC's, filled
	// by hop 1 by the dedup key.
	repartitioned bool
	spec          string                              // DEDUP_KEY, named in answers
	proc          atomic.Pointer[processor.Processor] // nil until the stage runs
}

// probeAnswer is GET /probe's answer: explain's answers, one per partition
// this member runs.
type probeAnswer struct {
	DedupKey string   `json:"dedup_key"` // DEDUP_KEY
	Parts    []string `json:"parts"`     // the key's parts as asked
	Topic    string   `json:"topic"`
	// Partitions is the topic's partition count; KeyPartition, with
	// REPARTITION_TOPIC, the one hop 1 routes the key to.
	Partitions   int              `json:"partitions"`
	KeyPartition *int             `json:"key_partition,omitempty"`
	Answers      []explain.Answer `json:"answers"`
}

// listenKeyProbe binds addr now, so that a taken port fails the start.
func listenKeyProbe(addr, dedupKey string, repartitioned bool, log *slog.Logger) (*keyProbe, error) {
	keys, err := key.Parse(dedupKey)
	if err != nil {
		return nil, fmt.Errorf("key probe: %w", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on PROBE_ADDR %s: %w", addr, err)
	}
	p := &keyProbe{ln: ln, log: log, keys: keys, spec: dedupKey, repartitioned: repartitioned}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /probe", p.serveProbe)
	p.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	return p, nil
}

// Addr is the bound address.
func (p *keyProbe) Addr() string { return p.ln.Addr().String() }

// form is what the status page's probe form needs of p (nil: no form).
func (p *keyProbe) form() probeForm {
	if p == nil {
		return probeForm{}
	}
	return probeForm{addr: p.Addr(), parts: p.keys.PartNames()}
}

// Serve answers requests until Shutdown.
func (p *keyProbe) Serve() {
	if err := p.srv.Serve(p.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		p.log.Error("serve key probe", "err", err)
	}
}

// Shutdown stops accepting and waits for requests in flight until ctx ends.
func (p *keyProbe) Shutdown(ctx context.Context) error {
	if err := p.srv.Shutdown(ctx); err != nil {
		return fmt.Errorf("shut down key probe: %w", err)
	}
	return nil
}

// serveProbe answers GET /probe?key=K, or ?part=A&part=B for a composite
// DEDUP_KEY (one part per source, in order). The key is never logged: it
// may be personal data.
func (p *keyProbe) serveProbe(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	parts := q["part"]
	if k, ok := q["key"]; ok {
		if len(parts) > 0 || len(k) != 1 {
			http.Error(w, "give the key as one key=, or its parts as part= (one per source of DEDUP_KEY, in order)", http.StatusBadRequest)
			return
		}
		parts = k
	}
	raw := make([][]byte, len(parts))
	for i, s := range parts {
		raw[i] = []byte(s)
	}
	dk, err := p.keys.KeyOf(raw)
	if err != nil {
		http.Error(w, fmt.Sprintf("%v (give key= or part=)", err), http.StatusBadRequest)
		return
	}
	proc := p.proc.Load()
	if proc == nil {
		http.Error(w, "the stage is not running here yet (or this process runs only the re-key hop)", http.StatusServiceUnavailable)
		return
	}
	got := proc.AskKey(r.Context(), dk)
	out := probeAnswer{DedupKey: p.spec, Parts: parts, Topic: got.Topic, Partitions: got.Partitions, Answers: []explain.Answer{}}
	for _, pa := range got.Answers {
		a := explain.NewAnswer(got.Topic, pa.Partition, pa.KeyAnswer)
		if pa.Err != nil {
			a = explain.Answer{Topic: got.Topic, Partition: pa.Partition, Generation: "none", Windows: []explain.Window{}, Note: pa.Err.Error()}
		} else {
			pos := pa.Offset
			a.Position = &pos
		}
		out.Answers = append(out.Answers, a)
	}
	if p.repartitioned && got.Partitions > 0 {
		kp := explain.MarkKeyPartition(out.Answers, dk, got.Partitions)
		out.KeyPartition = &kp
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if err := json.NewEncoder(w).Encode(out); err != nil {
		p.log.Debug("write key probe answer", "err", err)
	}
}
