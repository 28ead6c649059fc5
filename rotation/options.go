package rotation

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Options size and configure a Pair.
type Options struct {
	ExpectedKeys uint64        // distinct keys per window (per partition)
	FPRate       float64       // target false-positive rate at ExpectedKeys
	Window       time.Duration // window length; boundaries are multiples of it since the Unix epoch
	Mode         Mode          // zero means Counting

	// otherSizing marks the options of a decoded fingerprint pair whose
	// geometry is not the one this release gives these options (a
	// snapshot of a release that sized the pair otherwise). Such a pair
	// cannot stand in for one New builds (CopyTo needs equal geometry), so
	// its options compare unequal to the configured ones, and a partition
	// keeps it read-only beside new filters until its keys expire (see
	// processor/partition/legacy.go).
	otherSizing bool
}

// Limits on options; they keep every size computation inside uint64/int and
// bound what a snapshot header may make the decoder allocate.
const (
	maxExpectedKeys = 1 << 36
	minFPRate       = 1e-9
	maxFPRate       = 0.5
	maxWindow       = 1 << 60 // about 36 years; keeps window arithmetic inside int64
)

// MaxExpectedKeys is the most ExpectedKeys New accepts, for callers that
// check a setting before allocating anything.
const MaxExpectedKeys = maxExpectedKeys

// normalize fills defaults and reports every invalid field at once.
func (o Options) normalize() (Options, error) {
	if o.Mode == 0 {
		o.Mode = Counting
	}
	var errs []error
	if o.ExpectedKeys == 0 || o.ExpectedKeys > maxExpectedKeys {
		errs = append(errs, fmt.Errorf("expected keys %d: want 1..%d", o.ExpectedKeys, uint64(maxExpectedKeys)))
	}
	if math.IsNaN(o.FPRate) || o.FPRate < minFPRate || o.FPRate > maxFPRate {
		errs = append(errs, fmt.Errorf("false-positive rate %g: want %g..%g", o.FPRate, minFPRate, maxFPRate))
	}
	if o.Window <= 0 || o.Window > maxWindow {
		errs = append(errs, fmt.Errorf("window %v: want > 0 and <= %v", o.Window, time.Duration(maxWindow)))
	}
	if o.Mode != Counting && o.Mode != Plain && o.Mode != Fingerprint {
		errs = append(errs, fmt.Errorf("mode %v: want fingerprint, counting or plain", o.Mode))
	}
	if err := errors.Join(errs...); err != nil {
		return o, fmt.Errorf("validate options: %w", err)
	}
	return o, nil
}
