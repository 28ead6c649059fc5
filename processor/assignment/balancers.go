package assignment

import (
	"fmt"
	"log/slog"

	"github.com/segmentio/kafka-go"
)

// The balancer names KAFKA_GROUP_BALANCER takes.
const (
	NameSticky     = "sticky"
	NameRange      = "range"
	NameRoundRobin = "roundrobin"

	// DefaultName is the balancer used when none is chosen.
	DefaultName = NameSticky
)

// Balancers returns the group protocols a member offers for the balancer
// named name, most preferred first, for kafka.ConsumerGroupConfig's
// GroupBalancers, and the Sticky to give each generation to (Record); the
// Sticky is nil unless name is "sticky".
//
// "sticky" offers range second: the coordinator picks a protocol every
// member offers, so during a rolling upgrade from members that offer only
// range and round-robin the group keeps assigning (by range) and moves to
// sticky once the last of them has left.
func Balancers(name string, log *slog.Logger) ([]kafka.GroupBalancer, *Sticky, error) {
	switch name {
	case NameSticky:
		s := &Sticky{Log: log}
		return []kafka.GroupBalancer{s, kafka.RangeGroupBalancer{}}, s, nil
	case NameRange:
		return []kafka.GroupBalancer{kafka.RangeGroupBalancer{}}, nil, nil
	case NameRoundRobin:
		return []kafka.GroupBalancer{kafka.RoundRobinGroupBalancer{}}, nil, nil
	}
	return nil, nil, fmt.Errorf("choose group balancer %q: want %s, %s or %s", name, NameSticky, NameRange, NameRoundRobin)
}
