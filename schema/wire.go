package schema

// Frame splits a value in the Schema Registry wire format: magic byte 0, a
// 4-byte big-endian schema id, then the payload. ok is false when value is
// not in that format (too short, another magic byte).
//
// For Protobuf the payload starts with the message indexes (a zigzag
// varint count, then that many zigzag varint indexes; a single 0 byte for
// the first message), which the Plan compiled for the id reads.
func Frame(value []byte) (id uint32, payload []byte, ok bool) {
	if len(value) < 5 || value[0] != 0 {
		return 0, nil, false
	}
	id = uint32(value[1])<<24 | uint32(value[2])<<16 | uint32(value[3])<<8 | uint32(value[4])
	return id, value[5:], true
}
