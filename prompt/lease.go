package prompt

import (
	"context"
	"time"
)

// Leases lets processes that share one database take turns: a lease is
// a named right held by one holder until it lapses, renewed by its holder
// and taken over by another once it has lapsed. Several replicas use it
// to advance each prompt from one process at a time and to speak to
// Telegram from one. Implementations must make Lease a compare-and-set.
type Leases interface {
	// Lease gives name to holder until now+ttl if it is free, lapsed, or
	// held by holder already (a renewal), and reports whether holder now
	// holds it.
	Lease(ctx context.Context, name, holder string, now time.Time, ttl time.Duration) (bool, error)
	// Release gives name up if holder holds it; otherwise it does nothing.
	Release(ctx context.Context, name, holder string) error
	// LeaseHolder returns who holds name at now, and until when; "" if
	// nobody does.
	LeaseHolder(ctx context.Context, name string, now time.Time) (string, time.Time, error)
}
