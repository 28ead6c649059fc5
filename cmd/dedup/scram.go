package main

import (
	"context"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"

	"github.com/segmentio/kafka-go/sasl"
)

// scramMechanism is a SCRAM-SHA-256/512 client (RFC 5802, RFC 7677) for
// kafka-go. kafka-go's own sasl/scram package needs github.com/xdg-go/scram,
// which the module does not require; the standard library has every
// primitive SCRAM uses, so the client lives here.
//
// The password is used as given: SASLprep is the identity for the ASCII
// passwords Kafka deployments use, and non-ASCII ones are rare enough to
// leave to a SCRAM library when the module takes one in.
type scramMechanism struct {
	name     string
	newHash  func() hash.Hash
	username string
	password string
}

func newScramMechanism(name, username, password string) (*scramMechanism, error) {
	m := &scramMechanism{name: name, username: username, password: password}
	switch name {
	case saslScram256:
		m.newHash = sha256.New
	case saslScram512:
		m.newHash = sha512.New
	default:
		return nil, fmt.Errorf("unknown SCRAM mechanism %q", name)
	}
	if username == "" {
		return nil, errors.New("scram: empty username")
	}
	return m, nil
}

func (m *scramMechanism) Name() string { return m.name }

// Start sends client-first-message with a fresh nonce.
func (m *scramMechanism) Start(context.Context) (sasl.StateMachine, []byte, error) {
	raw := make([]byte, 24)
	if _, err := rand.Read(raw); err != nil {
		return nil, nil, fmt.Errorf("scram: make nonce: %w", err)
	}
	s := &scramSession{m: m, clientNonce: base64.RawStdEncoding.EncodeToString(raw)}
	s.clientFirstBare = "n=" + scramEscape(m.username) + ",r=" + s.clientNonce
	return s, []byte("n,," + s.clientFirstBare), nil
}

// scramSession is one authentication exchange.
type scramSession struct {
	m               *scramMechanism
	clientNonce     string
	clientFirstBare string
	serverSignature []byte // expected in server-final-message
	step            int
}

// gs2Header is "n,," (no channel binding, no authzid), base64-encoded for c=.
const gs2HeaderB64 = "biws"

func (s *scramSession) Next(_ context.Context, challenge []byte) (bool, []byte, error) {
	s.step++
	switch s.step {
	case 1:
		resp, err := s.clientFinal(string(challenge))
		return false, resp, err
	case 2:
		return true, nil, s.verifyServerFinal(string(challenge))
	}
	return false, nil, errors.New("scram: unexpected challenge after the exchange finished")
}

// clientFinal answers server-first-message with the client proof.
func (s *scramSession) clientFinal(serverFirst string) ([]byte, error) {
	attrs, err := scramAttrs(serverFirst)
	if err != nil {
		return nil, err
	}
	if e, ok := attrs["e"]; ok {
		return nil, fmt.Errorf("scram: server error %q", e)
	}
	nonce := attrs["r"]
	if !strings.HasPrefix(nonce, s.clientNonce) || len(nonce) == len(s.clientNonce) {
		return nil, errors.New("scram: server nonce does not extend the client nonce")
	}
	salt, err := base64.StdEncoding.DecodeString(attrs["s"])
	if err != nil || len(salt) == 0 {
		return nil, errors.New("scram: bad salt in server-first-message")
	}
	iter, err := strconv.Atoi(attrs["i"])
	if err != nil || iter < 1 {
		return nil, errors.New("scram: bad iteration count in server-first-message")
	}
	salted, err := pbkdf2.Key(s.m.newHash, s.m.password, salt, iter, s.m.newHash().Size())
	if err != nil {
		return nil, fmt.Errorf("scram: derive key: %w", err)
	}
	clientKey := s.hmac(salted, "Client Key")
	h := s.m.newHash()
	h.Write(clientKey)
	storedKey := h.Sum(nil)

	withoutProof := "c=" + gs2HeaderB64 + ",r=" + nonce
	authMessage := s.clientFirstBare + "," + serverFirst + "," + withoutProof
	proof := s.hmac(storedKey, authMessage)
	for i := range proof {
		proof[i] ^= clientKey[i]
	}
	s.serverSignature = s.hmac(s.hmac(salted, "Server Key"), authMessage)
	return []byte(withoutProof + ",p=" + base64.StdEncoding.EncodeToString(proof)), nil
}

// verifyServerFinal checks that the server knew the password too.
func (s *scramSession) verifyServerFinal(serverFinal string) error {
	attrs, err := scramAttrs(serverFinal)
	if err != nil {
		return err
	}
	if e, ok := attrs["e"]; ok {
		return fmt.Errorf("scram: server rejected authentication: %s", e)
	}
	got, err := base64.StdEncoding.DecodeString(attrs["v"])
	if err != nil || !hmac.Equal(got, s.serverSignature) {
		return errors.New("scram: server signature does not verify")
	}
	return nil
}

func (s *scramSession) hmac(key []byte, msg string) []byte {
	mac := hmac.New(s.m.newHash, key)
	mac.Write([]byte(msg))
	return mac.Sum(nil)
}

// scramAttrs splits "a=1,b=2" into its attributes.
func scramAttrs(msg string) (map[string]string, error) {
	attrs := make(map[string]string)
	for part := range strings.SplitSeq(msg, ",") {
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			return nil, fmt.Errorf("scram: malformed message %q", msg)
		}
		if len(k) == 1 { // longer names are extensions
			attrs[k] = v
		}
	}
	return attrs, nil
}

// scramEscape escapes a username as saslname requires.
func scramEscape(s string) string {
	return strings.NewReplacer("=", "=3D", ",", "=2C").Replace(s)
}
