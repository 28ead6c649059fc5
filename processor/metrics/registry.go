package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"dedup/registry"
)

// RegisterSchemaRegistry registers the schema registry client's families
// on reg, read from stats at each scrape.
func RegisterSchemaRegistry(reg prometheus.Registerer, stats func() registry.Stats) {
	r := registrar{reg}
	for _, o := range []struct {
		outcome string
		read    func(registry.Stats) uint64
	}{
		{"ok", func(s registry.Stats) uint64 { return s.RequestsOK }},
		{"not_found", func(s registry.Stats) uint64 { return s.RequestsNotFound }},
		{"unauthorized", func(s registry.Stats) uint64 { return s.RequestsUnauthorized }},
		{"unavailable", func(s registry.Stats) uint64 { return s.RequestsUnavailable }},
	} {
		register(r, prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "dedup_schema_registry_requests_total",
			Help:        "Requests to the schema registry by outcome: ok, not_found (40403: the values of that id are unkeyed), unauthorized (401/403: SCHEMA_REGISTRY_USERNAME/PASSWORD refused; records wait), unavailable (refused or dropped connections, timeouts, 5xx: records wait and the request is retried with back-off).",
			ConstLabels: prometheus.Labels{"outcome": o.outcome},
		}, func() float64 { return float64(o.read(stats())) }))
	}
	register(r, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "dedup_schema_registry_up",
		Help: "1 while the schema registry answers: 0 from a request that failed for an outage or refused credentials until one succeeds; 1 without schema-framed keys (nothing to fail).",
	}, func() float64 {
		if stats().Up {
			return 1
		}
		return 0
	}))
	register(r, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "dedup_schema_registry_waiting_schemas",
		Help: "Schema ids records wait for whose fetch has failed at least once: > 0 during an outage that holds records back.",
	}, func() float64 { return float64(stats().Waiting) }))
	register(r, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "dedup_schema_cache_schemas",
		Help: "Schema ids cached (known schemas and ids the registry does not know), within SCHEMA_REGISTRY_CACHE_BYTES.",
	}, func() float64 { return float64(stats().Schemas) }))
	register(r, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "dedup_schema_cache_bytes",
		Help: "Bytes the schema cache accounts for (schema texts, references, a fixed overhead per id); bounded by SCHEMA_REGISTRY_CACHE_BYTES.",
	}, func() float64 { return float64(stats().Bytes) }))
	register(r, prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "dedup_schema_cache_evictions_total",
		Help: "Schema ids dropped from the cache to keep it within SCHEMA_REGISTRY_CACHE_BYTES; each is fetched again when a record needs it.",
	}, func() float64 { return float64(stats().Evictions) }))
}
