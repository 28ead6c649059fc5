package partition

// replayMark is what a checkpoint needs of the restore's replay: outputs
// of inputs below to may already be in the output (Worker.suppressTo), and
// from is where the restore's scan started. The zero value: no replay.
type replayMark struct {
	to     int64
	dropTo int64 // the drops' as to is the outputs' (dropState.suppressTo)
	from   outputMark
}

// scanStart returns the output mark a checkpoint at input position
// pos must record: where a restore's replay scan has to start to find
// every output of an input at or after pos that is already in the output.
//
// ends were read when no output of an input at or after pos had been
// handed to this worker's writer. That is enough unless the partition is
// still replaying what an earlier generation forwarded: outputs of inputs
// between pos and suppressTo landed before ends were read, so a scan from
// ends would miss them and the next replay would forward them again. They
// all lie after the scan start of this worker's own restore, which then
// stands in for ends, with the partition counts it was read under. The
// same holds for drops (dropTo): the restore's scan start stands in for
// both topics' ends while either is replaying, which only scans more.
func (r replayMark) scanStart(pos int64, ends outputMark) outputMark {
	if pos < r.to || pos < r.dropTo {
		return r.from
	}
	return ends
}
