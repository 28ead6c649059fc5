package stagerun

import (
	"context"

	"dedup/bench/copyloop"
)

// CopyLoop is copyloop's loop as a Stage, the reference the stage is
// measured against: ready at once (it reads from the first offset), it
// copies the input up to its Ends and then idles until stopped. Give it
// no Counts: it forwards every record unless Seen drops some.
type CopyLoop copyloop.Options

// Run runs the loop, then waits for ctx.
func (c CopyLoop) Run(ctx context.Context) error {
	if _, err := copyloop.Run(ctx, copyloop.Options(c)); err != nil {
		return err
	}
	<-ctx.Done()
	return nil
}

// Ready is true: the loop has nothing to join or restore.
func (CopyLoop) Ready() bool { return true }
