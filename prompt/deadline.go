package prompt

import (
	"strings"
	"time"
)

// watchDeadlines makes sure the goroutine that expires and reminds
// requests runs, and wakes it: a new request may have the earliest
// deadline. It does nothing when neither timeout nor reminder is set, and
// during shutdown.
func (s *Service) watchDeadlines() {
	if s.timeout == 0 && s.remind == 0 {
		return
	}
	s.mu.Lock()
	if !s.watching && !s.closing {
		s.watching = true
		s.wg.Add(1)
		go s.deadlineLoop()
	}
	s.mu.Unlock()
	select {
	case s.deadlines <- struct{}{}:
	default:
	}
}

// deadlineLoop sleeps until the earliest deadline of a pending request,
// on the service's clock, then expires or reminds what is due. The
// service owns it; Close stops it.
func (s *Service) deadlineLoop() {
	defer s.wg.Done()
	due := make(chan struct{}, 1)
	stop := func() bool { return false }
	defer func() { stop() }()
	for {
		s.mu.Lock()
		closing := s.closing
		s.mu.Unlock()
		if closing {
			return
		}
		s.meetDeadlines()
		stop()
		if at, ok, err := s.store.NextDeadline(s.base); err != nil {
			s.log.Error("read approval deadlines", "err", err)
		} else if ok {
			wake := func() {
				select {
				case due <- struct{}{}:
				default:
				}
			}
			stop = s.afterFunc(max(at.Sub(s.now()), 0), wake)
			// The clock may have passed at between reading it and arming
			// the timer, which then waits that much too long: look again.
			if !s.now().Before(at) {
				wake()
			}
		}
		select {
		case <-s.base.Done():
			return
		case <-s.deadlines:
		case <-due:
		}
	}
}

// meetDeadlines expires the requests whose time is up, as a decision
// nobody made, and shows once more those due a reminder.
func (s *Service) meetDeadlines() {
	ctx := s.base
	now := s.now()
	expired, remind, err := s.store.DueApprovals(ctx, now)
	if err != nil {
		s.log.Error("read due approvals", "err", err)
		return
	}
	for _, ref := range expired {
		note := "no decision within " + shortDuration(s.timeout)
		if err := s.decide(ctx, ref.ID, Decision{Status: ApprovalExpired, At: now, Note: note}); err != nil {
			// ErrNotPending: decided just now; anything else: next time.
			s.log.Debug("expire approval", "approval", ref.ID, "err", err)
		}
	}
	for _, ref := range remind {
		sent, err := s.store.Remind(ctx, ref.ID)
		if err != nil {
			s.log.Error("remind of approval", "approval", ref.ID, "err", err)
			continue
		}
		if sent {
			s.onOutbox.emit(ctx, struct{}{})
		}
	}
}

// shortDuration writes d as people do: 30m, 1h30m, 45s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
