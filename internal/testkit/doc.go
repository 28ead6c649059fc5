// Package testkit is what the tests of the stage share: free ports,
// waiting for a condition, kfake clusters, environments, and building and
// starting the dedup binary. Tests only; the stage's packages do not
// import it.
package testkit
