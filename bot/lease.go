package bot

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"
)

// Replicas that share one database take turns through leases
// (prompt.Leases): the one holding "sender" delivers the outbox, so that
// Telegram hears one voice and its limits hold across replicas; in polling
// mode the one holding "poller" takes updates, as Telegram allows one
// getUpdates consumer. A holder renews its lease every third of LeaseTTL
// on the bot's clock and stops as soon as a renewal fails; the others try
// as often and take over once the lease lapses. During a takeover an old
// sender that stalled may still be at work: each entry is claimed before
// it is sent (Store.ClaimNotice), so only one of them sends it.

const (
	leaseSender = "sender"
	leasePoller = "poller"
	// defaultLeaseTTL is Config.LeaseTTL's default: a dead sender is
	// replaced within about this long.
	defaultLeaseTTL = 15 * time.Second
	// claimLeases is how many lease terms a claim on an outbox entry
	// lasts: long enough for a delivery with its retries, short enough
	// that an entry whose sender died goes out again soon after.
	claimLeases = 4
	// releaseTimeout bounds giving a lease up at the end of Run.
	releaseTimeout = 2 * time.Second
)

// Role is what a replica does now.
type Role struct {
	Replica string
	// Sender: it delivers the outbox.
	Sender bool
	// Poller: it takes updates with getUpdates (polling mode only; in
	// webhook mode every replica takes the deliveries it is handed).
	Poller bool
}

// Role returns what this replica does now. It is safe for concurrent use.
func (b *Bot) Role() Role {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.role
	r.Replica = b.cfg.Replica
	return r
}

func (b *Bot) setRole(name string, held bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch name {
	case leaseSender:
		b.role.Sender = held
	case leasePoller:
		b.role.Poller = held
	}
}

// randomReplica names a replica nobody named.
func randomReplica() string {
	var r [6]byte
	_, _ = rand.Read(r[:]) // never fails
	return "replica-" + hex.EncodeToString(r[:])
}

// lead runs work while this replica holds lease name, until ctx ends or
// work returns of itself. It tries to take the lease at once and then
// every third of LeaseTTL on the bot's clock, and renews it as often while
// held. When a renewal fails (refused, or the database did not answer) it
// ends lost, which work must heed, and waits for work to return before it
// tries again. Once quit is closed it no longer tries to take the lease
// (a holder goes on). When work returns it gives the lease up. Without
// Leases the process is alone: work runs at once, to its end.
func (b *Bot) lead(ctx context.Context, name string, quit <-chan struct{}, work func(ctx, lost context.Context)) {
	if b.cfg.Leases == nil {
		b.setRole(name, true)
		defer b.setRole(name, false)
		work(ctx, context.Background())
		return
	}
	every := b.cfg.LeaseTTL / 3
	tick := make(chan struct{}, 1)
	var done chan struct{} // open while work runs
	var lose context.CancelFunc
	for {
		// Set before the try, so that a test that sees the try can move
		// the clock to the next.
		stopTimer := b.cfg.Clock.AfterFunc(every, func() {
			select {
			case tick <- struct{}{}:
			default:
			}
		})
		held := b.lease(ctx, name)
		switch {
		case held && done == nil:
			b.log.Info("lease taken", "lease", name, "replica", b.cfg.Replica)
			b.setRole(name, true)
			lost, cancel := context.WithCancel(context.Background())
			done, lose = make(chan struct{}), cancel
			go func(done chan struct{}) {
				defer close(done)
				work(ctx, lost)
			}(done)
		case !held && done != nil && ctx.Err() == nil:
			lose()
			<-done
			done = nil
			b.setRole(name, false)
			b.log.Warn("lease lost; stopped", "lease", name, "replica", b.cfg.Replica)
		}
		waitQuit := quit
		if done != nil {
			waitQuit = nil
		}
		select {
		case <-tick:
			continue
		case <-done:
		case <-ctx.Done():
			if done != nil {
				<-done
			}
		case <-waitQuit:
		}
		stopTimer()
		if done != nil {
			lose()
			b.setRole(name, false)
			b.release(ctx, name)
		}
		return
	}
}

// lease takes or renews lease name at the bot's clock, and reports whether
// this replica holds it.
func (b *Bot) lease(ctx context.Context, name string) bool {
	held, err := b.cfg.Leases.Lease(ctx, name, b.cfg.Replica, b.cfg.Now(), b.cfg.LeaseTTL)
	if err != nil {
		if ctx.Err() == nil {
			b.log.Error("take or renew a lease", "lease", name, "err", err)
		}
		return false
	}
	return held
}

// release gives lease name up, so that another replica takes over at
// once rather than when it lapses.
func (b *Bot) release(ctx context.Context, name string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	if err := b.cfg.Leases.Release(ctx, name, b.cfg.Replica); err != nil {
		b.log.Warn("release a lease; another replica takes over when it lapses", "lease", name, "err", err)
		return
	}
	b.log.Info("lease released", "lease", name, "replica", b.cfg.Replica)
}

// claim claims outbox entry seq for this replica before it is sent, and
// reports whether it may send it. Without Leases the process is alone and
// needs no claim.
func (b *Bot) claim(ctx context.Context, seq int64) bool {
	if b.cfg.Leases == nil {
		return true
	}
	ok, err := b.cfg.Store.ClaimNotice(ctx, seq, b.cfg.Replica, b.cfg.Now(), claimLeases*b.cfg.LeaseTTL)
	if err != nil {
		if ctx.Err() == nil {
			b.log.Error("claim an outbox entry", "seq", seq, "err", err)
		}
		return false
	}
	return ok
}
