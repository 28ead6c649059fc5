package registry

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"time"
)

// The defaults of Options, each defined here only; the configuration
// documents these values.
const (
	// DefaultTimeout bounds one HTTP request to one registry URL.
	DefaultTimeout = 5 * time.Second
	// DefaultCacheBytes bounds the cache: thousands of typical schemas.
	DefaultCacheBytes = 64 << 20
	// DefaultBackoffFirst and DefaultBackoffMax are the background fetch's
	// wait after its first failure and its longest wait: doubling, with
	// jitter. Short at first, since records of the id wait for it; capped
	// so that a registry back from an outage is noticed within seconds.
	DefaultBackoffFirst = 200 * time.Millisecond
	DefaultBackoffMax   = 10 * time.Second
)

// Options configure a Client. Zero durations and sizes take the defaults
// above.
type Options struct {
	// URLs of the registry, http:// or https://, tried in turn: the one
	// that answered last first, then the others on an outage.
	URLs []string
	// Username and Password, if set, go with every request as HTTP basic
	// auth (Confluent Cloud: the API key and secret).
	Username, Password string
	// TLS configures https:// URLs; nil: the system's roots.
	TLS *tls.Config
	// Timeout bounds one HTTP request to one URL.
	Timeout time.Duration
	// CacheBytes bounds the memory of the cache: the text of each cached
	// schema and of its references, plus entryOverhead per id. Past it the
	// oldest ids are evicted (first in, first out) and fetched again when
	// asked for.
	CacheBytes int64
	// Logger receives the registry's state changes; nil: discarded.
	Logger *slog.Logger
	// BackoffFirst and BackoffMax: the background fetch's wait after its
	// first failure, doubled (with jitter) up to BackoffMax.
	BackoffFirst, BackoffMax time.Duration
}

// withDefaults validates o and fills in the defaults; every problem is
// reported at once.
func (o Options) withDefaults() (Options, error) {
	var errs []error
	if len(o.URLs) == 0 {
		errs = append(errs, errors.New("no schema registry url"))
	}
	for _, raw := range o.URLs {
		if err := checkURL(raw); err != nil {
			errs = append(errs, err)
		}
	}
	if o.Password != "" && o.Username == "" {
		errs = append(errs, errors.New("schema registry password set without a username"))
	}
	if o.Username != "" && o.Password == "" {
		// A secret that did not reach the environment: the registry
		// would refuse every request, so say it before any.
		errs = append(errs, errors.New("schema registry username set without a password"))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"timeout", o.Timeout}, {"first back-off", o.BackoffFirst}, {"max back-off", o.BackoffMax}} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("schema registry %s %s is negative", d.name, d.v))
		}
	}
	if o.CacheBytes < 0 {
		errs = append(errs, fmt.Errorf("schema registry cache bytes %d is negative", o.CacheBytes))
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.CacheBytes == 0 {
		o.CacheBytes = DefaultCacheBytes
	}
	if o.BackoffFirst == 0 {
		o.BackoffFirst = DefaultBackoffFirst
	}
	if o.BackoffMax == 0 {
		o.BackoffMax = DefaultBackoffMax
	}
	if o.BackoffMax < o.BackoffFirst {
		errs = append(errs, fmt.Errorf("schema registry max back-off %s is below the first back-off %s", o.BackoffMax, o.BackoffFirst))
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if err := errors.Join(errs...); err != nil {
		return o, fmt.Errorf("check schema registry options: %w", err)
	}
	o.URLs = append([]string(nil), o.URLs...)
	return o, nil
}

// checkURL accepts an absolute http or https URL without credentials: the
// URLs appear in logs and in Health, so credentials belong in Username
// and Password.
func checkURL(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return fmt.Errorf("parse schema registry url: %w", err)
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("schema registry url %q: scheme must be http or https", u.Redacted())
	case u.Host == "":
		return fmt.Errorf("schema registry url %q: no host", u.Redacted())
	case u.User != nil:
		return fmt.Errorf("schema registry url %q: credentials in the url would be logged; set the username and password instead", u.Redacted())
	}
	return nil
}
