package prompt

import (
	"context"
	"errors"
	"fmt"
	"slices"
)

// kick asks for prompt id to be advanced: queued for a worker, or looked
// at again by the worker that has it. It returns the prompt's place in
// the line for a worker (0: a worker takes it at once). During shutdown
// it does nothing: the prompt stays as stored, for the next start.
func (s *Service) kick(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return 0
	}
	if e := s.entries[id]; e != nil {
		e.again = true
		return 0
	}
	s.startLocked()
	// The first idle workers take the first queued prompts.
	pos := 0
	if len(s.queue) >= s.idle {
		pos = len(s.queue) - s.idle + 1
	}
	s.entries[id] = &entry{}
	s.queue = append(s.queue, id)
	s.wake.Signal()
	return pos
}

// startLocked starts the workers and, with leases, the takeover loop,
// once.
func (s *Service) startLocked() {
	if s.started || s.closing {
		return
	}
	s.started = true
	s.wg.Add(s.workers)
	for range s.workers {
		go s.work()
	}
	s.idle = s.workers
	if s.leases != nil {
		// The first look is timed here, not in the goroutine, so that it
		// is due a TTL after the start as the caller sees it.
		tick := make(chan struct{}, 1)
		stop := s.afterFunc(s.ttl, func() { signal(tick) })
		s.wg.Add(1)
		go s.takeoverLoop(tick, stop)
	}
}

func (s *Service) dequeueLocked(id string) {
	if i := slices.Index(s.queue, id); i >= 0 {
		s.queue = slices.Delete(s.queue, i, i+1)
	}
	delete(s.entries, id)
}

// work is one worker: it takes prompts in order and advances each until it
// pauses or ends. The service owns it; Close stops it.
func (s *Service) work() {
	defer s.wg.Done()
	for {
		s.mu.Lock()
		for len(s.queue) == 0 && !s.closing {
			s.wake.Wait()
		}
		if s.closing {
			s.idle--
			s.mu.Unlock()
			return
		}
		id := s.queue[0]
		s.queue = s.queue[1:]
		s.idle--
		e := s.entries[id]
		e.running = true
		for {
			// Set under the lock that marks it running: a Cancel that finds
			// the entry running calls e.cancel.
			ctx, cancel := context.WithCancelCause(s.base)
			e.cancel, e.again = cancel, false
			s.mu.Unlock()
			s.pass(ctx, cancel, id)
			cancel(nil)
			s.mu.Lock()
			if !e.again || s.closing || s.base.Err() != nil {
				delete(s.entries, id)
				s.idle++
				s.mu.Unlock()
				break
			}
		}
	}
}

// shutdown reports whether ctx was cut by Close (not by a user's Cancel):
// the step stops and leaves the prompt as stored, for the next start.
func shutdown(ctx context.Context) bool {
	return ctx.Err() != nil && !errors.Is(context.Cause(ctx), errCancelled)
}

// cancelled reports whether a user's Cancel cut ctx.
func cancelled(ctx context.Context) bool {
	return errors.Is(context.Cause(ctx), errCancelled)
}

// storeCtx is the context of a save or load a step makes. It does not
// honour ctx's cancellation: once a step decided to save (a tool's result,
// say), a Cancel or a shutdown landing during the save must not lose it;
// the step sees ctx at its next turn instead.
func storeCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), saveTimeout)
}

// Recovered tells what Recover found.
type Recovered struct {
	// Resumed is how many running prompts were queued again.
	Resumed int
	// Resent is how many waiting requests were put in the outbox to be
	// shown again.
	Resent int
}

// Recover resumes the prompts an earlier process left running and puts
// every request left waiting for a human in the outbox to be shown again
// (once, however often the process restarts before it is sent). Calls
// found executing become interrupted with an "outcome unknown" error
// result and are never run again. Prompts this service already has queued
// or running are left alone, and so, when the store has leases, are those
// another replica holds: that replica is alive and advancing them (if it
// dies, the takeover loop Recover starts picks them up once their leases
// lapse). Waiting prompts are not loaded.
func (s *Service) Recover(ctx context.Context) (Recovered, error) {
	var rec Recovered
	var running []string
	if err := s.eachRunning(ctx, func(ids []string) { running = append(running, ids...) }); err != nil {
		return rec, fmt.Errorf("recover: %w", err)
	}
	n, err := s.store.ResendWaiting(ctx)
	if err != nil {
		return rec, fmt.Errorf("recover: re-send waiting requests: %w", err)
	}
	rec.Resent = n
	s.mu.Lock()
	s.startLocked()
	s.mu.Unlock()
	for _, id := range running {
		adopted, err := s.adopt(ctx, id)
		if err != nil {
			return rec, fmt.Errorf("recover prompt %s: %w", id, err)
		}
		if adopted {
			rec.Resumed++
		}
	}
	// A deadline that passed while no process ran is met now.
	s.watchDeadlines()
	s.log.Info("recovered prompts", "running", rec.Resumed, "waiting_resent", rec.Resent)
	if rec.Resent > 0 {
		s.onOutbox.emit(ctx, struct{}{})
	}
	return rec, nil
}

// recoverPage is how many prompts Recover reads at once.
const recoverPage = 500

// repair makes a prompt found running after a crash consistent before it
// runs: a call found executing may or may not have had its effect.
func (s *Service) repair(ctx context.Context, id string) error {
	p, err := s.store.LoadPrompt(ctx, id)
	if err != nil {
		return err
	}
	_, _, _, err = s.commit(ctx, p, func(p *Prompt) ([]int, bool) {
		var changed []int
		for i := range p.Output {
			call := p.Output[i].Call
			if call == nil || call.Status != CallExecuting {
				continue
			}
			call.Status = CallInterrupted
			call.Result = &Result{Type: ResultError, Error: InterruptedError}
			if call.Approval != nil {
				call.Approval.Note = InterruptedError
			}
			changed = append(changed, i)
		}
		return changed, len(changed) > 0
	})
	return err
}
