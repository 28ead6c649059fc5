package partition

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"dedup/rotation"
)

func testPair(t *testing.T, o rotation.Options, keys ...string) *rotation.Pair {
	t.Helper()
	p, err := rotation.New(o)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		p.TestAndAdd([]byte(k), time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	}
	return p
}

// TestStateRoundTrip: a state without a legacy pair encodes exactly as its
// pair (old snapshots and pair-only readers stay valid); one with a legacy
// pair and retracted keys decodes to the same pair, legacy pair and keys.
func TestStateRoundTrip(t *testing.T) {
	o := rotation.Options{ExpectedKeys: 1000, FPRate: 1e-6, Window: time.Hour, Mode: rotation.Fingerprint}
	old := rotation.Options{ExpectedKeys: 500, FPRate: 1e-3, Window: time.Minute, Mode: rotation.Counting}
	pair := testPair(t, o, "a", "b")

	var plain, bare bytes.Buffer
	if _, err := (partitionState{pair: pair}).WriteTo(&plain); err != nil {
		t.Fatal(err)
	}
	if _, err := pair.WriteTo(&bare); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(plain.Bytes(), bare.Bytes()) {
		t.Fatal("a state without a legacy pair does not encode as its pair")
	}
	var got rotation.Pair
	if l, err := readState(bytes.NewReader(plain.Bytes()), &got); err != nil || l != nil {
		t.Fatalf("decode pair only: legacy %v, %v", l, err)
	}

	l := newLegacy(testPair(t, old, "x", "y", "z"))
	l.retract([]byte("y"))
	l.retract([]byte("never-added")) // not held: not recorded
	var full bytes.Buffer
	if _, err := (partitionState{pair: pair, legacy: l}).WriteTo(&full); err != nil {
		t.Fatal(err)
	}
	var p2 rotation.Pair
	l2, err := readState(bytes.NewReader(full.Bytes()), &p2)
	if err != nil {
		t.Fatal(err)
	}
	if p2.Options() != o || !p2.Test([]byte("a")) || l2 == nil || l2.pair.Options() != old {
		t.Fatalf("decoded pair %+v, legacy %v", p2.Options(), l2)
	}
	if len(l2.retracted) != 1 {
		t.Fatalf("retracted keys %v, want [y]", l2.retracted)
	}
	for key, want := range map[string]bool{"x": true, "y": false, "z": true, "a": false} {
		if got := l2.seen([]byte(key)); got != want {
			t.Errorf("legacy seen(%s) = %v, want %v", key, got, want)
		}
	}
	if !bytes.Equal(full.Bytes()[:bare.Len()], bare.Bytes()) {
		t.Error("the pair's encoding does not lead the payload")
	}
}

// TestStateCorruptLegacy: a legacy section cut short at any point, with a
// bad header or an impossible key length, or followed by more bytes, is an
// ErrLegacyFormat, never a panic or an allocation of the declared size.
func TestStateCorruptLegacy(t *testing.T) {
	o := rotation.Options{ExpectedKeys: 100, FPRate: 1e-3, Window: time.Hour, Mode: rotation.Counting}
	pair := testPair(t, o, "a")
	l := newLegacy(testPair(t, o, "b", "c"))
	l.retract([]byte("b"))
	var full, bare bytes.Buffer
	if _, err := (partitionState{pair: pair, legacy: l}).WriteTo(&full); err != nil {
		t.Fatal(err)
	}
	if _, err := pair.WriteTo(&bare); err != nil {
		t.Fatal(err)
	}
	b := full.Bytes()
	cases := map[string][]byte{
		"bad magic":     append(append([]byte{}, b[:bare.Len()]...), append([]byte("XLEG"), b[bare.Len()+4:]...)...),
		"huge key size": append(append([]byte{}, b[:len(b)-1-4]...), binary.LittleEndian.AppendUint32(nil, 1<<31)...),
	}
	cases["trailing bytes"] = append(append([]byte{}, b...), "garbage"...)
	for _, cut := range []int{bare.Len() + 3, bare.Len() + 6, bare.Len() + 50, len(b) - 5, len(b) - 1} {
		cases[fmt.Sprintf("cut at %d of %d", cut, len(b))] = b[:cut]
	}
	for name, data := range cases {
		var p rotation.Pair
		if _, err := readState(bytes.NewReader(data), &p); !errors.Is(err, ErrLegacyFormat) {
			t.Errorf("%s: %v, want %v", name, err, ErrLegacyFormat)
		}
	}
}

// TestStateLongRetractedKey: a retracted key of any length the writer
// writes reads back (a key over 1 MiB made a saved checkpoint unreadable).
func TestStateLongRetractedKey(t *testing.T) {
	o := rotation.Options{ExpectedKeys: 100, FPRate: 1e-3, Window: time.Hour, Mode: rotation.Counting}
	long := strings.Repeat("k", 1<<20+1)
	l := newLegacy(testPair(t, o, long, "short"))
	l.retract([]byte(long))
	l.retract([]byte("short"))
	var b bytes.Buffer
	if _, err := (partitionState{pair: testPair(t, o, "a"), legacy: l}).WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	var p rotation.Pair
	got, err := readState(&b, &p)
	if err != nil {
		t.Fatalf("a saved state does not read back: %v", err)
	}
	if len(got.retracted) != 2 || got.seen([]byte(long)) || got.seen([]byte("short")) {
		t.Errorf("retracted keys read back: %d, want both", len(got.retracted))
	}
}
