package config

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"dedup/key"
	"dedup/registry"
)

// RegistryURLs is SCHEMA_REGISTRY_URL as a list; nil when unset.
func (c *Config) RegistryURLs() []string {
	var urls []string
	for _, u := range strings.Split(c.RegistryURL, ",") {
		if u = strings.TrimSpace(u); u != "" {
			urls = append(urls, u)
		}
	}
	return urls
}

// validateRegistry checks the SCHEMA_REGISTRY_ variables.
func (c *Config) validateRegistry(bad func(v, format string, args ...any), positive func(v string, d time.Duration)) {
	for _, u := range c.RegistryURLs() {
		pu, err := url.Parse(u)
		if err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
			bad("SCHEMA_REGISTRY_URL", "%q: want http:// or https:// with a host", u)
		}
	}
	if (c.RegistryUsername == "") != (c.RegistryPassword == "") {
		v := "SCHEMA_REGISTRY_PASSWORD"
		if c.RegistryUsername == "" {
			v = "SCHEMA_REGISTRY_USERNAME"
		}
		bad(v, "SCHEMA_REGISTRY_USERNAME and SCHEMA_REGISTRY_PASSWORD go together: set both or neither")
	}
	for _, f := range []struct{ v, path string }{
		{"SCHEMA_REGISTRY_TLS_CA_FILE", c.RegistryTLSCAFile},
		{"SCHEMA_REGISTRY_TLS_CERT_FILE", c.RegistryCertFile},
		{"SCHEMA_REGISTRY_TLS_KEY_FILE", c.RegistryKeyFile},
	} {
		if f.path == "" {
			continue
		}
		if fh, err := os.Open(f.path); err != nil {
			bad(f.v, "cannot read file: %v", err)
		} else {
			fh.Close()
		}
	}
	if (c.RegistryCertFile == "") != (c.RegistryKeyFile == "") {
		v := "SCHEMA_REGISTRY_TLS_KEY_FILE"
		if c.RegistryCertFile == "" {
			v = "SCHEMA_REGISTRY_TLS_CERT_FILE"
		}
		bad(v, "SCHEMA_REGISTRY_TLS_CERT_FILE and SCHEMA_REGISTRY_TLS_KEY_FILE go together: set both or neither")
	}
	if strings.TrimSpace(c.RegistrySubject) != c.RegistrySubject || c.RegistrySubject == "" {
		bad("SCHEMA_REGISTRY_SUBJECT", "must be a subject name without surrounding blanks, got %q", c.RegistrySubject)
	}
	positive("SCHEMA_REGISTRY_TIMEOUT", c.RegistryTimeout)
	if c.RegistryCache < 1<<20 {
		bad("SCHEMA_REGISTRY_CACHE_BYTES", "must be at least 1M, got %d", c.RegistryCache)
	}
}

// registryTLS is the TLS configuration for an https registry: nil when
// nothing is set (Go's defaults, system roots).
func (c *Config) registryTLS() (*tls.Config, error) {
	if c.RegistryTLSCAFile == "" && c.RegistryCertFile == "" && !c.RegistryInsecure {
		return nil, nil
	}
	tc := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		InsecureSkipVerify: c.RegistryInsecure, //nolint:gosec // opt-in via SCHEMA_REGISTRY_TLS_INSECURE_SKIP_VERIFY
	}
	if c.RegistryTLSCAFile != "" {
		pem, err := os.ReadFile(c.RegistryTLSCAFile)
		if err != nil {
			return nil, fmt.Errorf("read SCHEMA_REGISTRY_TLS_CA_FILE: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("read SCHEMA_REGISTRY_TLS_CA_FILE: no PEM certificate in %s", c.RegistryTLSCAFile)
		}
		tc.RootCAs = pool
	}
	if c.RegistryCertFile != "" {
		cert, err := tls.LoadX509KeyPair(c.RegistryCertFile, c.RegistryKeyFile)
		if err != nil {
			return nil, fmt.Errorf("load SCHEMA_REGISTRY_TLS_CERT_FILE/SCHEMA_REGISTRY_TLS_KEY_FILE: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// Registry opens the Schema Registry client DEDUP_KEY needs; nil, nil
// when it reads no schema-framed value.
func (c *Config) Registry(log *slog.Logger) (*registry.Client, error) {
	ks, err := key.Parse(c.Key)
	if err != nil || !ks.Schemas() {
		return nil, err
	}
	tc, err := c.registryTLS()
	if err != nil {
		return nil, err
	}
	return registry.New(registry.Options{
		URLs:       c.RegistryURLs(),
		Username:   c.RegistryUsername,
		Password:   c.RegistryPassword,
		TLS:        tc,
		Timeout:    c.RegistryTimeout,
		CacheBytes: c.RegistryCache,
		Logger:     log,
	})
}
