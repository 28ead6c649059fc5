// Package registrytest is an in-memory Schema Registry on an httptest
// server, for the tests of the stage (this module's packages and its e2e
// tests). It speaks the part of the Confluent Schema Registry REST API that
// the stage's registry client and pkg/sr's client use: schemas by id,
// subjects and their versions, registering a schema, errors as
// {"error_code", "message"} JSON with the Confluent codes. Redpanda's
// schema registry and Apicurio's Confluent-compatible API (ccompat) serve
// the same paths with the same bodies, so a client that works against this
// server works against all three.
//
// Served:
//
//	GET  /schemas/ids/{id}                      {"schema", "schemaType" (omitted for AVRO), "references"}
//	GET  /schemas/ids/{id}/schema               the schema text
//	GET  /schemas/ids/{id}/versions             [{"subject", "version"}]
//	GET  /subjects                              ["subject", ...]
//	GET  /subjects/{subject}/versions           [1, 2, ...]
//	GET  /subjects/{subject}/versions/{v}       {"subject", "version", "id", "schema", "schemaType", "references"}; v is a number, "latest" or -1
//	GET  /subjects/{subject}/versions/{v}/schema the schema text
//	POST /subjects/{subject}/versions           register: {"id"}
//	POST /subjects/{subject}                    look a schema up in a subject
//
// Not served: schema contexts, deletes over HTTP, compatibility, modes,
// configs; query parameters (deleted=true, normalize, ...) are ignored.
//
// Ids are global as in the real registry: the same schema (type, text and
// references) registered again, in any subject, gets the id it got first;
// registered in a subject that already has it, it adds no version.
//
// Test controls: Register (no HTTP), DeleteSubject, Requests (how many
// requests arrived, by path prefix), SetDown (answer 503, hang, drop the
// connection, or stop listening: connection refused), SetAuth (require
// HTTP basic auth). The server listens on 127.0.0.1 only and keeps its
// address across SetDown(Stopped) and back.
package registrytest

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
)

// Mode is how the server answers; Up is normal service.
type Mode uint8

const (
	// Up: requests are served.
	Up Mode = iota
	// Unavailable: every request is answered 503 with error_code 50301,
	// what a registry without a leader or behind a load balancer with no
	// healthy backend answers.
	Unavailable
	// Hang: requests get no answer until the client gives up (its
	// timeout), the mode changes or the server closes.
	Hang
	// Drop: the connection of every request is closed without an answer.
	Drop
	// Stopped: the server does not listen; connections are refused. Any
	// other mode starts it again on the same address.
	Stopped
)

// String names the mode in test output.
func (m Mode) String() string {
	switch m {
	case Up:
		return "up"
	case Unavailable:
		return "unavailable"
	case Hang:
		return "hang"
	case Drop:
		return "drop"
	case Stopped:
		return "stopped"
	}
	return "unknown"
}

// ContentType is the media type the Confluent API answers with.
const ContentType = "application/vnd.schemaregistry.v1+json"

// restartWait bounds how long SetDown waits for the address to be free
// again when the server starts listening after Stopped.
const restartWait = 5 * time.Second

type stored struct {
	schema   sr.Schema
	versions []sr.SubjectVersion // where it is registered
}

// Server is the registry. Its methods are safe for concurrent use.
type Server struct {
	addr   string // 127.0.0.1:port, kept across restarts
	tls    bool
	router http.Handler

	mu       sync.Mutex
	srv      *httptest.Server  // nil while Stopped
	cert     *x509.Certificate // the TLS server's, kept while Stopped
	schemas  []stored          // id-1 -> schema
	byKey    map[string]int    // canonical schema -> id
	subjects map[string][]int  // subject -> id of each version (version = index+1); deleted subjects are absent
	requests map[string]int    // path -> requests that arrived
	mode     Mode
	release  chan struct{} // closed when Hang ends
	user     string
	pass     string
	auth     bool
	closed   bool
}

// New starts a plain-HTTP registry on 127.0.0.1.
func New() *Server { return start(false) }

// NewTLS starts an HTTPS registry on 127.0.0.1 with httptest's certificate
// (valid for 127.0.0.1); ClientTLS trusts it.
func NewTLS() *Server { return start(true) }

func start(useTLS bool) *Server {
	s := &Server{
		tls:      useTLS,
		byKey:    map[string]int{},
		subjects: map[string][]int{},
		requests: map[string]int{},
		release:  make(chan struct{}),
	}
	s.router = s.routes()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(fmt.Sprintf("registrytest: listen: %v", err))
	}
	s.addr = ln.Addr().String()
	s.serve(ln)
	return s
}

// serve starts an httptest server on ln. Called with mu held or before
// the server is shared.
func (s *Server) serve(ln net.Listener) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(s.handle))
	// The client tests provoke TLS handshake failures and dropped
	// connections on purpose; the server's own log would only be noise.
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.Listener.Close()
	srv.Listener = ln
	if s.tls {
		srv.StartTLS()
		s.cert = srv.Certificate()
	} else {
		srv.Start()
	}
	s.srv = srv
}

// URL is the registry's base URL (http:// or https://127.0.0.1:port).
func (s *Server) URL() string {
	if s.tls {
		return "https://" + s.addr
	}
	return "http://" + s.addr
}

// ClientTLS is a client TLS configuration that trusts the server's
// certificate; nil for a plain-HTTP server.
func (s *Server) ClientTLS() *tls.Config {
	if !s.tls {
		return nil
	}
	s.mu.Lock()
	cert := s.cert
	s.mu.Unlock()
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
}

// Register registers sch under subject as POST /subjects/{subject}/versions
// would and returns its id. It panics if a reference names a subject
// version that is not registered (a test's own mistake; the real registry
// refuses such a schema).
func (s *Server) Register(subject string, sch sr.Schema) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	id, err := s.registerLocked(subject, sch)
	if err != nil {
		panic(fmt.Sprintf("registrytest: register in subject %q: %v", subject, err))
	}
	return id
}

// DeleteSubject removes subject and its versions, as a hard delete does:
// the subject answers 40401 from then on. Its schemas stay readable by id,
// as in the real registry when another subject or a record still uses the
// id.
func (s *Server) DeleteSubject(subject string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.subjects, subject)
}

// Requests is how many requests arrived whose path (unescaped:
// "/subjects/acme/date.proto/versions/1") starts with prefix, in any mode
// but Stopped, whatever the answer was.
func (s *Server) Requests(prefix string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for p, c := range s.requests {
		if strings.HasPrefix(p, prefix) {
			n += c
		}
	}
	return n
}

// SetDown sets how the server answers from now on (Up: normally).
// Stopped closes the listener and every connection; leaving Stopped
// listens on the same address again.
func (s *Server) SetDown(m Mode) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || m == s.mode {
		return
	}
	was := s.mode
	s.mode = m
	if was == Hang {
		close(s.release)
		s.release = make(chan struct{})
	}
	switch {
	case m == Stopped:
		srv := s.srv
		s.srv = nil
		srv.CloseClientConnections()
		srv.Close()
	case was == Stopped:
		s.serve(listenAgain(s.addr))
	}
}

// listenAgain listens on addr, waiting for the port the stopped server
// held to be free.
func listenAgain(addr string) net.Listener {
	deadline := time.Now().Add(restartWait)
	for {
		ln, err := net.Listen("tcp", addr)
		if err == nil {
			return ln
		}
		if time.Now().After(deadline) {
			panic(fmt.Sprintf("registrytest: listen on %s again: %v", addr, err))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// SetAuth requires HTTP basic auth with user and pass from now on (401
// with error_code 40101 otherwise); an empty user turns it off.
func (s *Server) SetAuth(user, pass string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.user, s.pass, s.auth = user, pass, user != ""
}

// Close stops the server, releasing any hanging request first.
func (s *Server) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	if s.mode == Hang {
		close(s.release)
	}
	srv := s.srv
	s.srv = nil
	s.mu.Unlock()
	if srv != nil {
		srv.CloseClientConnections()
		srv.Close()
	}
}

// handle counts the request, then answers it.
func (s *Server) handle(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.requests[r.URL.Path]++
	s.mu.Unlock()
	s.answer(w, r)
}

// answer applies the test controls, then routes.
func (s *Server) answer(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	mode, release, closed := s.mode, s.release, s.closed
	user, pass, auth := s.user, s.pass, s.auth
	s.mu.Unlock()

	if closed {
		writeError(w, http.StatusServiceUnavailable, 50301, "Service unavailable: test registry closing")
		return
	}
	switch mode {
	case Unavailable:
		writeError(w, http.StatusServiceUnavailable, 50301, "Service unavailable: test registry down")
		return
	case Hang:
		select {
		case <-r.Context().Done():
			return
		case <-release:
			// The mode changed or the server closes: answer as the
			// server is now.
			s.answer(w, r)
			return
		}
	case Drop:
		hj, ok := w.(http.Hijacker)
		if !ok {
			panic("registrytest: response writer cannot be hijacked")
		}
		conn, _, err := hj.Hijack()
		if err == nil {
			conn.Close()
		}
		return
	}
	if auth {
		u, p, ok := r.BasicAuth()
		if !ok || u != user || p != pass {
			w.Header().Set("WWW-Authenticate", `Basic realm="registrytest"`)
			writeError(w, http.StatusUnauthorized, 40101, "Unauthorized")
			return
		}
	}
	s.router.ServeHTTP(w, r)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("registrytest: encode answer: %v", err))
	}
	w.Header().Set("Content-Type", ContentType)
	w.WriteHeader(code)
	w.Write(body)
}

func writeError(w http.ResponseWriter, status, code int, msg string) {
	writeJSON(w, status, map[string]any{"error_code": code, "message": msg})
}

// key is a schema's identity for id reuse: type, text and references.
func key(sch sr.Schema) string {
	var refs []byte
	if len(sch.References) > 0 {
		refs, _ = json.Marshal(sch.References)
	}
	return sch.Type.String() + "\x00" + sch.Schema + "\x00" + string(refs)
}

func (s *Server) registerLocked(subject string, sch sr.Schema) (int, error) {
	if subject == "" {
		return 0, fmt.Errorf("empty subject")
	}
	if sch.Schema == "" {
		return 0, fmt.Errorf("empty schema")
	}
	for _, ref := range sch.References {
		if _, ok := s.versionLocked(ref.Subject, ref.Version); !ok {
			return 0, fmt.Errorf("reference %q: subject %q has no version %d", ref.Name, ref.Subject, ref.Version)
		}
	}
	sch = sr.Schema{Schema: sch.Schema, Type: sch.Type, References: slices.Clone(sch.References)}
	k := key(sch)
	id, ok := s.byKey[k]
	if !ok {
		s.schemas = append(s.schemas, stored{schema: sch})
		id = len(s.schemas)
		s.byKey[k] = id
	}
	versions := s.subjects[subject]
	if slices.Contains(versions, id) {
		return id, nil
	}
	s.subjects[subject] = append(versions, id)
	st := &s.schemas[id-1]
	st.versions = append(st.versions, sr.SubjectVersion{Subject: subject, Version: len(versions) + 1})
	return id, nil
}

// versionLocked is the id of a subject's version; version -1 is the latest.
func (s *Server) versionLocked(subject string, version int) (int, bool) {
	versions := s.subjects[subject]
	if version == -1 {
		version = len(versions)
	}
	if version < 1 || version > len(versions) {
		return 0, false
	}
	return versions[version-1], true
}
