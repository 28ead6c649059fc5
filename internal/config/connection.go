package config

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/segmentio/kafka-go/sasl/scram"
)

// SASL mechanisms accepted in KAFKA_SASL_MECHANISM (Kafka's own spellings).
const (
	saslPlain    = "PLAIN"
	saslScram256 = "SCRAM-SHA-256"
	saslScram512 = "SCRAM-SHA-512"
)

// dialTimeout bounds connecting, including the TLS handshake and SASL exchange.
const dialTimeout = 10 * time.Second

// Connection carries what every Kafka client of the binary needs to reach the
// brokers: the group/reader side uses Dialer, the writer/admin side Transport.
// Both share one TLS config and one SASL mechanism.
type Connection struct {
	Brokers   []string
	Dialer    *kafka.Dialer
	Transport *kafka.Transport
}

// newConnection builds the dialer and transport from the TLS and SASL variables.
func NewConnection(cfg *Config, brokers []string) (*Connection, error) {
	tlsCfg, err := cfg.tlsConfig()
	if err != nil {
		return nil, err
	}
	mech, err := cfg.SASL()
	if err != nil {
		return nil, err
	}
	return &Connection{
		Brokers: brokers,
		Dialer: &kafka.Dialer{
			Timeout:       dialTimeout,
			DualStack:     true,
			TLS:           tlsCfg,
			SASLMechanism: mech,
			ClientID:      cfg.ClientID,
		},
		Transport: &kafka.Transport{
			DialTimeout: dialTimeout,
			TLS:         tlsCfg,
			SASL:        mech,
			ClientID:    cfg.ClientID,
		},
	}, nil
}

// probeTransport is a transport with c's security and client id but its
// own connections, for a one-off probe: a connection a silent broker left
// hanging is never reused.
func (c *Connection) ProbeTransport(dialTimeout time.Duration) *kafka.Transport {
	return &kafka.Transport{DialTimeout: dialTimeout, TLS: c.Transport.TLS, SASL: c.Transport.SASL, ClientID: c.Transport.ClientID}
}

// tlsConfig returns nil when TLS is off.
func (c *Config) tlsConfig() (*tls.Config, error) {
	if !c.TLSEnabled {
		return nil, nil
	}
	tc := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		InsecureSkipVerify: c.TLSInsecureSkipVerify, //nolint:gosec // opt-in via KAFKA_TLS_INSECURE_SKIP_VERIFY
	}
	if c.TLSCAFile != "" {
		pem, err := os.ReadFile(c.TLSCAFile)
		if err != nil {
			return nil, fmt.Errorf("read KAFKA_TLS_CA_FILE: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("read KAFKA_TLS_CA_FILE: no PEM certificate in %s", c.TLSCAFile)
		}
		tc.RootCAs = pool
	}
	if c.TLSCertFile != "" {
		cert, err := tls.LoadX509KeyPair(c.TLSCertFile, c.TLSKeyFile)
		if err != nil {
			return nil, fmt.Errorf("load KAFKA_TLS_CERT_FILE/KAFKA_TLS_KEY_FILE: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// saslMechanism returns nil when SASL is off.
func (c *Config) SASL() (sasl.Mechanism, error) {
	switch c.SASLMechanism {
	case "":
		return nil, nil
	case saslPlain:
		return plain.Mechanism{Username: c.SASLUsername, Password: c.SASLPassword}, nil
	case saslScram256, saslScram512:
		algo := scram.SHA256
		if c.SASLMechanism == saslScram512 {
			algo = scram.SHA512
		}
		m, err := scram.Mechanism(algo, c.SASLUsername, c.SASLPassword)
		if err != nil {
			return nil, fmt.Errorf("build KAFKA_SASL_MECHANISM %s: %w", c.SASLMechanism, err)
		}
		return m, nil
	}
	return nil, errors.New("unknown KAFKA_SASL_MECHANISM " + c.SASLMechanism)
}
