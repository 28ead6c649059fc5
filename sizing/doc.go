// Package sizing is the memory model of a dedup deployment: what one
// instance holds besides its partitions' filter pairs, and the container
// memory request, limit and GOMEMLIMIT that follow from it. `dedup size`
// prints it and the deploy tests hold the Kubernetes manifests to it, so
// the two cannot drift apart. The pairs' own size is rotation's figure
// (rotation.Pair.SizeBytes), never recomputed here.
//
// sizing.go holds the memory model (Deployment, Resources, the buffer
// shares); report.go sizes a Workload's filters (Size, one Filter per
// mode, from rotation's model and a sample checkpoint) and writes the
// report `dedup size` prints (Report); repartition.go sizes the
// repartition topic of REPARTITION_TOPIC (its throughput and storage);
// keycost.go holds the key extraction cost per DEDUP_KEY format that the
// report prints (KeyCosts), docs/benchmarks.md's measured figures.
package sizing
