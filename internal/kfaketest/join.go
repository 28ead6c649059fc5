package kfaketest

import "github.com/twmb/franz-go/pkg/kmsg"

// JoinErrorResponse answers a JoinGroup request with the error code, as a
// coordinator that would not take the member in.
func JoinErrorResponse(req *kmsg.JoinGroupRequest, code int16) *kmsg.JoinGroupResponse {
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	resp.Version = req.Version
	resp.ErrorCode = code
	return resp
}
