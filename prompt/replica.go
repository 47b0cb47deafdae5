package prompt

import (
	"context"
	"errors"
	"sync"
	"time"
)

// DefaultLeaseTTL is how long a replica holds a prompt it advances without
// renewing, when Config.LeaseTTL is zero.
const DefaultLeaseTTL = 30 * time.Second

// errLeaseLost is the cause of a pass's context cut because its prompt's
// lease passed to another replica. Like a shutdown, it leaves the prompt
// as stored, for the replica that holds it now.
var errLeaseLost = errors.New("the prompt's lease passed to another replica")

// leaseName is the name of the lease a replica holds while it advances
// prompt id.
func leaseName(id string) string { return "prompt:" + id }

// hold is one pass's lease on its prompt. It renews itself every TTL/3 on
// the service's clock until release; a renewal that finds the lease gone
// cuts the pass. A nil hold is the pass of a service without leases: it
// always holds.
type hold struct {
	s      *Service
	name   string
	cancel context.CancelCauseFunc

	mu    sync.Mutex
	until time.Time // the lease is this replica's until then, as far as it knows
	stop  func() bool
	ended bool
	// renewing counts the renewals under way, so that release waits for
	// them: a renewal landing after the release would take the lease back.
	renewing sync.WaitGroup
}

// take takes prompt id's lease for a pass that cancel cuts, and reports
// whether the pass may advance the prompt: false when another replica
// holds it (that replica advances it) or the store failed.
func (s *Service) take(ctx context.Context, id string, cancel context.CancelCauseFunc) (*hold, bool) {
	if s.leases == nil {
		return nil, true
	}
	h := &hold{s: s, name: leaseName(id), cancel: cancel}
	now := s.now()
	sctx, done := storeCtx(ctx)
	held, err := s.leases.Lease(sctx, h.name, s.replica, now, s.ttl)
	done()
	switch {
	case err != nil:
		// Nobody advances it now; the takeover loop looks again.
		s.log.Error("take prompt lease", "prompt", id, "err", err)
		return nil, false
	case !held:
		s.log.Debug("prompt advanced by another replica", "prompt", id)
		return nil, false
	}
	h.mu.Lock()
	h.until = now.Add(s.ttl)
	h.stop = s.afterFunc(s.renewEvery(), h.renew)
	h.mu.Unlock()
	return h, true
}

// renewEvery is how often a pass renews its lease: three tries before it
// lapses.
func (s *Service) renewEvery() time.Duration { return max(s.ttl/3, time.Millisecond) }

// holds reports whether the pass may take its next step: the lease has
// not lapsed on this replica's clock. Checked before every step, it stops
// a pass that was too slow to renew (a long pause, a stalled store) even
// before a renewal says so.
func (h *hold) holds() bool {
	if h == nil {
		return true
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.s.now().Before(h.until)
}

// renew runs on the service's clock. A lease another replica now holds
// cuts the pass; so does a store that fails until the lease would lapse
// before the next try.
func (h *hold) renew() {
	h.mu.Lock()
	if h.ended {
		h.mu.Unlock()
		return
	}
	h.renewing.Add(1)
	h.mu.Unlock()
	defer h.renewing.Done()
	s := h.s
	now := s.now()
	ctx, cancel := context.WithTimeout(s.base, saveTimeout)
	held, err := s.leases.Lease(ctx, h.name, s.replica, now, s.ttl)
	cancel()
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case err == nil && held:
		h.until = now.Add(s.ttl)
	case err == nil || !now.Add(s.renewEvery()).Before(h.until):
		// Another replica took the prompt over, or will be free to before
		// this one can try again. The pass stops before its next step.
		// What it is doing now (a model turn, a tool) may still finish and
		// try to save: the compare-and-set on Rev refuses a change the new
		// holder's saves have made stale, as it does a change any other
		// process raced, so the record stays consistent and a call the new
		// holder found executing (and marked "outcome unknown") is never
		// run or reported twice.
		s.log.Warn("prompt lease lost; pass stopped", "lease", h.name, "replica", s.replica, "err", err)
		h.until = time.Time{}
		h.cancel(errLeaseLost)
		return
	default:
		s.log.Warn("renew prompt lease", "lease", h.name, "until", h.until, "err", err)
	}
	if !h.ended {
		h.stop = s.afterFunc(s.renewEvery(), h.renew)
	}
}

// release ends the renewals and gives the lease up, so that another
// replica may advance the prompt at once (after a decision it took, say).
func (h *hold) release() {
	if h == nil {
		return
	}
	h.mu.Lock()
	h.ended = true
	h.stop()
	h.mu.Unlock()
	h.renewing.Wait()
	s := h.s
	ctx, cancel := context.WithTimeout(context.WithoutCancel(s.base), saveTimeout)
	defer cancel()
	if err := s.leases.Release(ctx, h.name, s.replica); err != nil {
		// It lapses by itself within the TTL.
		s.log.Warn("release prompt lease", "lease", h.name, "err", err)
	}
}

// pass advances prompt id under its lease; cancel cuts ctx.
func (s *Service) pass(ctx context.Context, cancel context.CancelCauseFunc, id string) {
	h, ok := s.take(ctx, id, cancel)
	if !ok {
		return
	}
	paused := s.advance(ctx, h, id)
	h.release()
	if !paused || h == nil || shutdown(ctx) {
		return
	}
	// A decision taken on another replica while this one still held the
	// lease found the lease taken and left the prompt to this replica:
	// look once more now that the lease is free. (Had the decision come
	// after the release, its replica took the lease and this look finds
	// the prompt held or paused again, and does nothing.)
	sctx, done := storeCtx(ctx)
	p, err := s.store.LoadPrompt(sctx, id)
	done()
	if err != nil {
		s.log.Error("load prompt after its pass", "prompt", id, "err", err)
		return
	}
	if p.State == StateRunning {
		s.kick(id)
	}
}

// adopt takes over prompt id, found running with no pass here: it takes
// the prompt's lease, repairs the prompt as after a crash, and queues it.
// It reports false, doing nothing, when a pass here has the prompt or
// another replica holds its lease. Repairing only under the lease is what
// keeps two replicas from both turning the same executing call into
// "outcome unknown" and both going on. The lease is kept for the pass,
// which renews it as its own; if the pass waits in line longer than the
// TTL the lease lapses and either replica may take the prompt.
func (s *Service) adopt(ctx context.Context, id string) (bool, error) {
	s.mu.Lock()
	if s.closing || s.entries[id] != nil {
		s.mu.Unlock()
		return false, nil
	}
	// Reserved, so that a kick meanwhile waits for the repair: a pass
	// started here now would save executing just for the repair to undo.
	e := &entry{running: true, cancel: func(error) {}}
	s.entries[id] = e
	s.mu.Unlock()
	adopted, err := s.repairHeld(ctx, id)
	s.mu.Lock()
	delete(s.entries, id)
	again := e.again
	s.mu.Unlock()
	if adopted || again {
		s.kick(id)
	}
	return adopted, err
}

func (s *Service) repairHeld(ctx context.Context, id string) (bool, error) {
	if s.leases != nil {
		held, err := s.leases.Lease(ctx, leaseName(id), s.replica, s.now(), s.ttl)
		if err != nil || !held {
			return false, err
		}
	}
	if err := s.repair(ctx, id); err != nil {
		return false, err
	}
	return true, nil
}

// eachRunning calls f with the IDs of the running prompts, a page at a
// time.
func (s *Service) eachRunning(ctx context.Context, f func(ids []string)) error {
	var cur Cursor
	for {
		ids, next, err := s.store.RunningPrompts(ctx, cur, recoverPage)
		if err != nil {
			return err
		}
		f(ids)
		if len(ids) < recoverPage {
			return nil
		}
		cur = next
	}
}

// takeoverLoop looks every LeaseTTL, on the service's clock, for running
// prompts whose lease lapsed (their replica died or shut down) and takes
// them over. The service owns it; Close stops it. Its first look is due
// when it starts: tick gets a value then, and stop cancels that.
func (s *Service) takeoverLoop(tick chan struct{}, stop func() bool) {
	defer s.wg.Done()
	for {
		select {
		case <-s.quit:
			stop()
			return
		case <-tick:
		}
		// The next look is due a TTL after this one began, however long
		// this one takes.
		stop = s.afterFunc(s.ttl, func() { signal(tick) })
		s.takeOver(s.base)
	}
}

// signal puts a value in ch unless one is waiting there already.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// takeOver adopts the running prompts no pass here has and no replica
// holds.
func (s *Service) takeOver(ctx context.Context) {
	running, taken := 0, 0
	err := s.eachRunning(ctx, func(ids []string) {
		running += len(ids)
		for _, id := range ids {
			s.mu.Lock()
			here, closing := s.entries[id] != nil, s.closing
			s.mu.Unlock()
			if closing {
				return
			}
			if here {
				continue
			}
			// A read first: most running prompts are held by a live
			// replica, and Lease is a write.
			holder, _, err := s.leases.LeaseHolder(ctx, leaseName(id), s.now())
			if err != nil {
				s.log.Error("read prompt lease", "prompt", id, "err", err)
				continue
			}
			if holder != "" {
				continue
			}
			ok, err := s.adopt(ctx, id)
			if err != nil {
				s.log.Error("take prompt over", "prompt", id, "err", err)
				continue
			}
			if ok {
				taken++
				s.log.Info("prompt taken over", "prompt", id, "replica", s.replica)
			}
		}
	})
	if err != nil {
		s.log.Error("list running prompts to take over", "err", err)
	}
	s.log.Debug("looked for prompts to take over", "replica", s.replica, "running", running, "taken", taken)
}
