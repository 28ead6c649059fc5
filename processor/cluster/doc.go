// Package cluster is the stage's view of the Kafka cluster, apart from
// consuming and producing: the admin requests it makes (metadata, offsets,
// topic configurations), the cluster watch that decides whether the
// brokers or a topic block progress, and the connections under it all.
//
// Files: cluster.go (the cluster watch: brokers and topics, Watch),
// admin.go (metadata, offsets and topic configurations on one client,
// Admin), truncation.go (partitions the stage writes to whose log went
// back, from acknowledged offsets and end offsets read every EndsInterval:
// Truncations), transport.go (a transport with its own connection pool,
// kafka-go's logger, Sleep, Every), deadline.go (the partition readers' dialer,
// whose connections skip needless read-deadline updates).
//
// Concurrency: Watch and Admin are safe for concurrent use.
package cluster
