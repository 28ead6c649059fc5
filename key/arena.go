package key

// Arena holds the key bytes Extract has to build rather than find in the
// record (numbers decoded from Avro or Protobuf, composite keys). A worker
// keeps one and resets it once every key taken from it is used, so that
// extraction allocates nothing at steady state. The zero value is ready.
type Arena struct {
	b []byte
}

// Reset makes the arena's memory reusable: keys returned before it must
// no longer be used.
func (a *Arena) Reset() { a.b = a.b[:0] }

// Len is the bytes in use, for tests.
func (a *Arena) Len() int { return len(a.b) }

// take returns a.b[from:] capped, so a later append cannot write into it.
func (a *Arena) take(from int) []byte {
	return a.b[from:len(a.b):len(a.b)]
}
