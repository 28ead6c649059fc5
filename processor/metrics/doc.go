// Package metrics holds every dedup_ metric family of the stage,
// registered at once so that /metrics lists each family from the start
// (docs/metrics.md documents each). The group runner sets its own series
// and hands each partition its series (Partition), dropped when the
// partition moves to another member (Forget); the output and the cluster
// watch are handed the families they set.
//
// Files: metrics.go (Metrics, New, the outcome and anomaly label values);
// registry.go (the schema registry client's families, read from its Stats
// at each scrape).
//
// Concurrency: safe for concurrent use.
package metrics
