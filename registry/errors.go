package registry

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/twmb/franz-go/pkg/sr"
)

// The environment variables an AuthError tells the operator to check: the
// stage reads the credentials from them (internal/config).
const (
	usernameVar = "SCHEMA_REGISTRY_USERNAME"
	passwordVar = "SCHEMA_REGISTRY_PASSWORD"
)

var (
	// ErrClosed is what Wait and Latest return once Close was called.
	ErrClosed = errors.New("schema registry client closed")
	// ErrSubjectNotFound is what Latest returns (wrapped) when the
	// registry has no such subject, or no live version of it (40401,
	// 40402).
	ErrSubjectNotFound = errors.New("subject not found")
	// ErrUnresolvableReference is what Latest returns (wrapped) when a
	// reference, or a reference's reference, names a subject version the
	// registry does not have, forms a cycle or nests deeper than
	// maxReferenceDepth. For a schema id the same finding makes the id
	// NotFound.
	ErrUnresolvableReference = errors.New("unresolvable schema reference")
)

// AuthError is the registry refusing the credentials (HTTP 401 or 403).
// Retrying does not help until the credentials or the registry's ACLs
// change, so it is worded for the operator.
type AuthError struct {
	URL        string // the registry URL that refused
	Username   string // the configured user; empty when none is configured
	StatusCode int    // 401 or 403
	Err        error  // the registry's answer (*sr.ResponseError)
}

func (e *AuthError) Error() string {
	status := fmt.Sprintf("%d %s", e.StatusCode, http.StatusText(e.StatusCode))
	if e.Username == "" {
		return fmt.Sprintf("schema registry at %s requires credentials (it answered %s): set %s and %s: %v",
			e.URL, status, usernameVar, passwordVar, e.Err)
	}
	return fmt.Sprintf("schema registry refused the credentials of %s %q at %s (it answered %s): check %s and %s, and the user's read access to schemas and subjects: %v",
		usernameVar, e.Username, e.URL, status, usernameVar, passwordVar, e.Err)
}

func (e *AuthError) Unwrap() error { return e.Err }

// UnavailableError is no registry URL answering: connections refused or
// dropped, timeouts, 5xx, or anything else that is neither an answer nor a
// refusal of the credentials. It names each URL tried with its failure.
type UnavailableError struct {
	Failures []*RequestError // one per URL tried, in the order tried
}

func (e *UnavailableError) Error() string {
	var b strings.Builder
	b.WriteString("schema registry unavailable: ")
	for i, f := range e.Failures {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(f.Error())
	}
	return b.String()
}

func (e *UnavailableError) Unwrap() []error {
	errs := make([]error, len(e.Failures))
	for i, f := range e.Failures {
		errs[i] = f
	}
	return errs
}

// RequestError is one request to one registry URL that failed.
type RequestError struct {
	URL  string // the registry's base URL
	Path string // what was asked, "/schemas/ids/7"
	Err  error  // *sr.ResponseError for an HTTP answer, else the transport's error
}

func (e *RequestError) Error() string {
	var re *sr.ResponseError
	if errors.As(e.Err, &re) {
		msg := fmt.Sprintf("%s: GET %s: %d %s", e.URL, e.Path, re.StatusCode, http.StatusText(re.StatusCode))
		if re.ErrorCode != 0 {
			msg += fmt.Sprintf(" (error code %d)", re.ErrorCode)
		}
		return msg + ": " + re.Error()
	}
	return fmt.Sprintf("%s: GET %s: %v", e.URL, e.Path, e.Err)
}

func (e *RequestError) Unwrap() error { return e.Err }

// notFoundError is the registry answering that the thing asked for does
// not exist, with one of the codes the request expects.
type notFoundError struct {
	req *RequestError
}

func (e *notFoundError) Error() string { return e.req.Error() }
func (e *notFoundError) Unwrap() error { return e.req }

// unresolvableError is a reference that cannot be resolved: the registry
// lacks its subject version, or it closes a cycle, or it nests too deep.
type unresolvableError struct {
	name    string
	subject string
	version int
	reason  string
	err     error // the registry's answer, when it said not found
}

func (e *unresolvableError) Error() string {
	msg := fmt.Sprintf("resolve reference %q (subject %q version %d): %s", e.name, e.subject, e.version, e.reason)
	if e.err != nil {
		msg += ": " + e.err.Error()
	}
	return msg
}

func (e *unresolvableError) Unwrap() []error {
	if e.err == nil {
		return []error{ErrUnresolvableReference}
	}
	return []error{ErrUnresolvableReference, e.err}
}
