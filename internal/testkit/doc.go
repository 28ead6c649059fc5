// Package testkit is what the tests of the stage share: free ports,
// waiting for a condition, kfake clusters, kafka-go clients on transports
// of their own, the TestMain that refuses kafka.DefaultTransport (Run),
// environments, and building and starting the dedup binary. Tests only;
// the stage's packages do not import it.
package testkit
