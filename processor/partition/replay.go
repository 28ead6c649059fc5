package partition

// scanStart returns the output end offsets a checkpoint at input position
// pos must record: where a restore's replay scan has to start to find
// every output of an input at or after pos that is already in the output.
//
// ends were read when no output of an input at or after pos had been
// handed to this worker's writer. That is enough unless the partition is
// still replaying what an earlier generation forwarded: outputs of inputs
// between pos and suppressTo landed before ends were read, so a scan from
// ends would miss them and the next replay would forward them again. They
// all lie after the scan start of this worker's own restore, which then
// stands in for ends. Read-only fields set before the saver starts: safe
// from the saver goroutine.
func (w *Worker) scanStart(pos int64, ends map[int]int64) map[int]int64 {
	if pos < w.suppressTo {
		return w.replayFrom
	}
	return ends
}
