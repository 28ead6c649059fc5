package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"dedup/internal/testkit"
)

// runAgainst starts the stage in-process against an external (kfake)
// cluster configured by extra, pushes duplicates through it with a
// franz-go client using clientOpts, and checks the deduplicated output.
func runAgainst(t *testing.T, cluster *kfake.Cluster, extra testkit.Env, clientOpts []kgo.Opt) {
	t.Helper()
	addr := cluster.ListenAddrs()[0]
	env := testEnv(t)
	env["KAFKA_BROKERS"] = addr
	env["LOG_LEVEL"] = "info"
	for k, v := range extra {
		env[k] = v
	}
	metrics := env["METRICS_ADDR"]
	stage := startInProcess(t, env)
	waitReady(t, stage, metrics)

	const keys, copies = 10, 2
	client := append([]kgo.Opt{kgo.SeedBrokers(addr)}, clientOpts...)
	testkit.Produce(t, client, keyedWithDuplicates("events", keys, copies)...)
	out := testkit.ConsumeN(t, client, "events-deduped", keys)
	checkForwarded(t, out, keys)
	testkit.WaitFor(t, "duplicates counted", 30*time.Second, func() (bool, error) {
		n, err := testkit.MetricSum(metrics, "dedup_messages_total", `outcome="duplicate"`)
		return n == keys*(copies-1), err
	})
	if code := stage.stop(t); code != exitOK {
		t.Fatalf("exit code after stop = %d, want 0", code)
	}
}

// TestSASL authenticates every Kafka client of the stage (group, readers,
// writer, checkpoint store) with each supported mechanism.
func TestSASL(t *testing.T) {
	const user, pass = "dedup-user", "s3cret,=pass"
	for _, mech := range []struct {
		name   string
		client kgo.Opt
	}{
		{"PLAIN", kgo.SASL(plain.Auth{User: user, Pass: pass}.AsMechanism())},
		{"SCRAM-SHA-256", kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha256Mechanism())},
		{"SCRAM-SHA-512", kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha512Mechanism())},
	} {
		t.Run(mech.name, func(t *testing.T) {
			cluster := testkit.Cluster(t, 2, kfake.EnableSASL(), kfake.Superuser(mech.name, user, pass))
			runAgainst(t, cluster, testkit.Env{
				"KAFKA_SASL_MECHANISM": mech.name,
				"KAFKA_SASL_USERNAME":  user,
				"KAFKA_SASL_PASSWORD":  pass,
			}, []kgo.Opt{mech.client})
		})
	}
}

// TestSASLWrongPasswordFails checks the failure is a runtime failure (exit
// 1), not a hang and not a configuration error. kfake answers a wrong
// password by closing the connection, which looks like a network error, so
// start-up retries it until KAFKA_STARTUP_TIMEOUT; a broker's
// SASLAuthenticationFailed ends start-up at once (TestStartupPermanentErrors).
func TestSASLWrongPasswordFails(t *testing.T) {
	cluster := testkit.Cluster(t, 2, kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-256", "u", "right"))
	env := testEnv(t)
	env["KAFKA_BROKERS"] = cluster.ListenAddrs()[0]
	env["KAFKA_SASL_MECHANISM"] = "SCRAM-SHA-256"
	env["KAFKA_SASL_USERNAME"] = "u"
	env["KAFKA_SASL_PASSWORD"] = "wrong"
	env["KAFKA_STARTUP_TIMEOUT"] = "3s"
	stage := startInProcess(t, env)
	select {
	case code := <-stage.done:
		stage.done <- code
		if code != exitFailure {
			t.Fatalf("exit %d, want %d", code, exitFailure)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("stage with a wrong SASL password did not fail within 60s")
	}
}

// TestTLS connects through TLS verified against a CA file.
func TestTLS(t *testing.T) {
	dir := t.TempDir()
	serverCert, caFile := selfSignedCert(t, dir)
	cluster := testkit.Cluster(t, 2, kfake.TLS(&tls.Config{Certificates: []tls.Certificate{serverCert}, MinVersion: tls.VersionTLS12}))
	pool := x509.NewCertPool()
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool.AppendCertsFromPEM(caPEM)
	runAgainst(t, cluster, testkit.Env{
		"KAFKA_TLS_ENABLED": "true",
		"KAFKA_TLS_CA_FILE": caFile,
	}, []kgo.Opt{kgo.DialTLSConfig(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})})
}

// selfSignedCert makes a certificate for 127.0.0.1 and writes it as the CA file.
func selfSignedCert(t *testing.T, dir string) (tls.Certificate, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "dedup-test-broker"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:              []string{"localhost"},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return cert, caFile
}
