// Package service is the deduplication stage as `dedup run` runs it:
// start-up (status server, embedded broker or the configured brokers,
// reaching them, the checkpoint store, the processor) and the stop within
// SHUTDOWN_TIMEOUT. Run runs it once; Start and Service.Run let a caller
// (`dedup demo`) read its progress in between.
//
// service.go holds the start-up and the stop, startup.go the wait for the
// brokers and the start-up status, store.go the checkpoint store,
// status.go the HTTP status server and the metrics registry, probe.go the
// key probe on PROBE_ADDR.
package service
