// Package demo is `dedup demo`: a generator of duplicate-laden traffic
// (generator.go, its keyed stream drawn by bench/workload) sent to the
// stage, with a live progress line (demo.go).
package demo
