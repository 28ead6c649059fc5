// Package config is the stage's configuration: every environment variable
// the binary reads, with its default and meaning, parsed and validated so
// that one run names every problem at once (config.go); integer settings
// read as counts like 10M or 1.5k (count.go); the Kafka connection settings,
// TLS and SASL, built from it (connection.go); the Schema Registry
// client of schema-framed keys, with its own TLS settings (registry.go); and the logger LOG_LEVEL and
// LOG_FORMAT ask for (logging.go).
package config
