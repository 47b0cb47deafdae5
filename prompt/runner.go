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
	if !s.started {
		s.started = true
		s.wg.Add(s.workers)
		for range s.workers {
			go s.work()
		}
		s.idle = s.workers
	}
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
			s.advance(ctx, id)
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

// Recover resumes the prompts an earlier process left running and returns
// the requests left waiting for a human, to be read page by page. Calls
// found executing become interrupted with an "outcome unknown" error
// result and are never run again. Prompts this service already has queued
// or running are left alone. Waiting prompts are not loaded until read
// from the returned Waiting.
func (s *Service) Recover(ctx context.Context) (*Waiting, error) {
	var running []string
	var cur Cursor
	for {
		ids, next, err := s.store.RunningPrompts(ctx, cur, recoverPage)
		if err != nil {
			return nil, fmt.Errorf("recover: %w", err)
		}
		running = append(running, ids...)
		if len(ids) < recoverPage {
			break
		}
		cur = next
	}
	// The first page of waiting prompts is read before anything resumes,
	// so a resumed prompt that pauses is not listed as well as announced.
	w := &Waiting{s: s, skip: map[string]bool{}}
	for _, id := range running {
		w.skip[id] = true
	}
	if err := w.read(ctx); err != nil {
		return nil, fmt.Errorf("recover: %w", err)
	}
	for _, id := range running {
		s.mu.Lock()
		_, here := s.entries[id]
		s.mu.Unlock()
		if here {
			continue // created or resumed by this process: its worker owns it
		}
		if err := s.repair(ctx, id); err != nil {
			return nil, fmt.Errorf("recover prompt %s: %w", id, err)
		}
		s.kick(id)
		w.Resumed++
	}
	s.log.Info("recovered prompts", "running", w.Resumed)
	return w, nil
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
	_, _, err = s.commit(ctx, p, func(p *Prompt) ([]int, bool) {
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

// Waiting pages through the approval requests that were waiting when
// Recover ran. It is not safe for concurrent use.
type Waiting struct {
	// Resumed is how many running prompts Recover queued again.
	Resumed int

	s       *Service
	cur     Cursor
	skip    map[string]bool
	page    []*Prompt
	started bool
	done    bool
}

// waitingPage is how many waiting prompts one Next reads.
const waitingPage = 100

func (w *Waiting) read(ctx context.Context) error {
	ps, next, err := w.s.store.WaitingPrompts(ctx, w.cur, waitingPage)
	if err != nil {
		return fmt.Errorf("waiting prompts: %w", err)
	}
	w.page, w.cur, w.done = ps, next, len(ps) < waitingPage
	return nil
}

// Next returns the next page of requests, oldest first; an empty page
// means there are no more. Each page is read from the store when Next is
// called, except the first, which Recover read: a request decided since
// may still be in it, and a sender should check before it shows buttons.
func (w *Waiting) Next(ctx context.Context) ([]ApprovalRequest, error) {
	for {
		if w.started {
			if w.done {
				return nil, nil
			}
			if err := w.read(ctx); err != nil {
				return nil, err
			}
		}
		w.started = true
		var reqs []ApprovalRequest
		for _, p := range w.page {
			if w.skip[p.ID] {
				continue
			}
			if req, ok := p.PendingRequest(); ok {
				reqs = append(reqs, req)
			}
		}
		w.page = nil
		if len(reqs) > 0 || w.done {
			return reqs, nil
		}
	}
}
