package registry

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
)

// outcome is what one HTTP request to one URL came to, for Stats.
type outcome uint8

const (
	outcomeOK outcome = iota
	outcomeNotFound
	outcomeUnauthorized
	outcomeUnavailable
	outcomes // the number of outcomes
)

// errNoText is a 200 answer without a schema: not a registry answering
// (a proxy's page, a wrong base path), so an outage rather than a finding.
var errNoText = errors.New("answer without schema text")

// request is one thing asked of the registry, on whichever URL answers.
type request struct {
	path     string // for messages: "/schemas/ids/7"
	notFound []int  // the error codes that mean what was asked for does not exist
	asker    asker
	do       func(ctx context.Context, cl *sr.Client) error
}

// asker is who asks: the log attributes that name what for, and whether
// the outcome is the registry's health.
type asker struct {
	attrs []any // "schema_id", 7
	// background: the fetches set Health and log its changes; Latest's
	// caller hears its outcome itself, and a failure Latest found would
	// stay in Health with no retry to clear it.
	background bool
}

// call runs req on each URL in turn, starting with the one that answered
// last, until one answers: nil, a *notFoundError, an *AuthError, or, when
// none answered, an *UnavailableError. An answer of not found goes on to
// the other URLs first: a follower behind its leader does not have the
// newest ids yet, and a not-found answer is cached for good. It returns
// ctx's error if ctx ends, without counting that against the registry.
func (c *Client) call(ctx context.Context, req request) error {
	seq := c.seq.Add(1)
	n := len(c.clients)
	first := int(c.prefer.Load())
	var (
		failures []*RequestError
		notFound *notFoundError
	)
	for i := range n {
		k := (first + i) % n
		err := req.do(ctx, c.clients[k])
		if err != nil && ctx.Err() != nil {
			return ctx.Err()
		}
		rerr := &RequestError{URL: c.o.URLs[k], Path: req.path, Err: cause(err)}
		o := classify(err, req.notFound)
		c.requests[o].Add(1)
		switch o {
		case outcomeOK:
			c.prefer.Store(int32(k))
			c.report(seq, nil, req.asker)
			return nil
		case outcomeNotFound:
			if notFound == nil {
				notFound = &notFoundError{req: rerr}
				c.prefer.Store(int32(k))
			}
		case outcomeUnauthorized:
			// The URLs are one registry with one user store: the
			// others would refuse too.
			ae := &AuthError{URL: c.o.URLs[k], Username: c.o.Username, StatusCode: statusOf(err), Err: rerr}
			c.report(seq, ae, req.asker)
			return ae
		default:
			failures = append(failures, rerr)
		}
	}
	if notFound != nil {
		c.report(seq, nil, req.asker)
		return notFound
	}
	ue := &UnavailableError{Failures: failures}
	c.report(seq, ue, req.asker)
	return ue
}

// classify sorts a request's error: an answer (found or not), a refusal
// of the credentials, or an outage. A 404 without one of the expected
// codes is an outage: a wrong base path or a proxy answers so, and caching
// it as not found would make every record of the id undecodable for good.
func classify(err error, notFound []int) outcome {
	if err == nil {
		return outcomeOK
	}
	var re *sr.ResponseError
	if !errors.As(err, &re) {
		return outcomeUnavailable
	}
	switch {
	case re.StatusCode == http.StatusUnauthorized || re.StatusCode == http.StatusForbidden:
		return outcomeUnauthorized
	case re.StatusCode == http.StatusNotFound && slices.Contains(notFound, re.ErrorCode):
		return outcomeNotFound
	}
	return outcomeUnavailable
}

func statusOf(err error) int {
	var re *sr.ResponseError
	if errors.As(err, &re) {
		return re.StatusCode
	}
	return 0
}

// cause strips pkg/sr's and net/http's wrapping of a transport error,
// which name the request URL twice; RequestError names it once.
func cause(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// health is whether the registry answers: the outcome of the background
// fetches' latest call, by when calls started.
type health struct {
	mu    sync.Mutex
	seq   uint64    // the call whose outcome is the state
	err   error     // nil while the registry answers
	since time.Time // failing since
}

func isAuth(err error) bool {
	var ae *AuthError
	return errors.As(err, &ae)
}

// report records the outcome of call seq, if a background fetch made it,
// and logs a change of state once: a Warn when the registry starts
// failing, an Error when it refuses the credentials, an Info when it
// answers again; nothing per retry. A call that started before the one
// that set the state does not change it, so a slow failure that began
// before the registry came back does not say it failed again.
func (c *Client) report(seq uint64, err error, a asker) {
	if !a.background {
		return
	}
	h := &c.health
	h.mu.Lock()
	defer h.mu.Unlock()
	if seq < h.seq {
		return
	}
	h.seq = seq
	prev := h.err
	h.err = err
	if err != nil && prev == nil {
		h.since = time.Now()
	}
	log := c.o.Logger
	args := func() []any {
		args := append([]any{"urls", c.o.URLs}, a.attrs...)
		return append(args, "err", err)
	}
	switch {
	case err == nil && prev != nil:
		log.Info("schema registry answers again", "urls", c.o.URLs, "failing_for", time.Since(h.since).Round(time.Millisecond))
	case err == nil:
	case isAuth(err) && !isAuth(prev):
		log.Error("schema registry refused the credentials: records of schemas not cached wait; one line when it answers again", args()...)
	case !isAuth(err) && (prev == nil || isAuth(prev)):
		log.Warn("schema registry starts failing: records of schemas not cached wait, retrying with back-off; one line when it answers again", args()...)
	}
}

// Health is nil while the registry answers the background fetches (found
// or not found alike); otherwise their last failure: an *AuthError when
// it refuses the credentials, an *UnavailableError naming each URL and
// its failure when none answers. For /readyz and the logs.
func (c *Client) Health() error {
	c.health.mu.Lock()
	defer c.health.mu.Unlock()
	return c.health.err
}
