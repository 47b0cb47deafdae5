package bot

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	tgbot "github.com/go-telegram/bot"

	"tollgate/prompt"
)

// The sender delivers the outbox: what a change in the core obliges
// Tollgate to tell a chat, recorded with the change itself. One goroutine
// (deliver) finds the oldest undelivered notice of each conversation and
// hands each to a goroutine of its own, at most maxInFlight at once, so a
// chat never waits behind another (a blocked chat, a 429 for one chat);
// within a chat notices go one at a time, in the order of the changes that
// caused them. Start-up and normal running are the same path: a restart
// simply finds the outbox as the last process left it.

const (
	// maxInFlight bounds the conversations delivered to at once.
	maxInFlight = 32
	// readBatch is how many due entries one read of the outbox takes.
	readBatch = 256
	// maxResendsInFlight bounds the re-sends among them: a few keep the
	// global rate busy, and a live notice then waits behind a few re-sends
	// at most, not behind every slot.
	maxResendsInFlight = 4
	// senderPoll is how long the sender sleeps when nothing wakes it: a
	// notice recorded by another process, say, is found by then.
	senderPoll = 30 * time.Second
	// firstHold and maxHold bound the wait before a failed delivery is
	// tried again (doubling per attempt); a 429 holds for its retry_after.
	firstHold = 2 * time.Second
	maxHold   = 10 * time.Minute
)

// wakeSender tells the sender to look at the outbox now. It never blocks.
func (b *Bot) wakeSender() {
	select {
	case b.outbox <- struct{}{}:
	default:
	}
}

// deliver runs the sender until ctx ends, then waits for the deliveries
// under way. Once updates stop (shutdown) it drains: it delivers what is
// due, the answers of prompts that ended during the shutdown among them,
// and returns when nothing more is; Run's drain bounds how long.
//
// It reads due entries a batch at a time and re-reads when something new
// may be due: a wake, a live delivery done (its chat's next entry), an
// empty batch, a hold running out. A long run of re-sends, one per chat,
// is served from the batch without a read per message.
//
// When lost closes (this replica lost the sender's lease) it starts no
// new delivery, waits for those under way and returns. An entry another
// sender has claimed is left to it and looked at again a third of
// LeaseTTL later, when that claim may have lapsed.
func (b *Bot) deliver(ctx context.Context, lost <-chan struct{}) {
	type delivered struct {
		conv    string
		seq     int64
		resend  bool
		claimed bool
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	b.mu.Lock()
	poll := b.pollCtx.Done()
	b.mu.Unlock()
	draining, refresh := false, true
	inFlight := map[string]bool{}
	// claimed holds, per entry, until when to leave it to the sender that
	// claimed it. (A refusal may also mean it was delivered since it was
	// read: the chat's next entry is then not held up.)
	claimed := map[int64]time.Time{}
	resends := 0
	var batch []prompt.OutboxEntry
	done := make(chan delivered, maxInFlight)
	// The wait for a hold to run out is on the bot's clock, so tests can
	// move it.
	due := make(chan struct{}, 1)
	stopTimer := func() bool { return false }
	defer func() { stopTimer() }()
	for {
		if refresh {
			refresh = false
			entries, err := b.cfg.Store.DueNotices(ctx, b.cfg.Now(), readBatch)
			if err != nil && ctx.Err() == nil {
				b.log.Error("read the outbox", "err", err)
			}
			batch = batch[:0]
			now := b.cfg.Now()
			for _, e := range entries {
				if until, ok := claimed[e.Seq]; ok && now.Before(until) {
					continue
				}
				delete(claimed, e.Seq)
				if !inFlight[e.ConversationID] {
					batch = append(batch, e)
				}
			}
		}
		if draining && len(batch) == 0 && len(inFlight) == 0 {
			return
		}
		rest := batch[:0]
		for _, e := range batch {
			if len(inFlight) >= maxInFlight || inFlight[e.ConversationID] || (e.Resend && resends >= maxResendsInFlight) {
				rest = append(rest, e)
				continue
			}
			inFlight[e.ConversationID] = true
			if e.Resend {
				resends++
			}
			wg.Go(func() {
				ok := b.deliverOne(ctx, e)
				done <- delivered{e.ConversationID, e.Seq, e.Resend, ok}
			})
		}
		batch = rest
		wait := senderPoll
		if b.cfg.Leases != nil {
			// Other replicas record notices too, and nothing in this
			// process hears of them: look as often as the lease renews.
			wait = min(wait, b.cfg.LeaseTTL/3)
		}
		if at, ok, err := b.cfg.Store.NextNoticeAt(ctx); err == nil && ok {
			wait = min(wait, max(at.Sub(b.cfg.Now()), 0))
		}
		for seq, until := range claimed {
			left := until.Sub(b.cfg.Now())
			if left <= 0 {
				// Looked at once more, then forgotten: an entry
				// delivered meanwhile is never read again.
				delete(claimed, seq)
			}
			wait = min(wait, max(left, 0))
		}
		stopTimer()
		stopTimer = b.cfg.Clock.AfterFunc(wait, func() {
			select {
			case due <- struct{}{}:
			default:
			}
		})
		select {
		case <-ctx.Done():
			return
		case <-lost:
			return
		case <-poll:
			draining, poll, refresh = true, nil, true
		case d := <-done:
			delete(inFlight, d.conv)
			if d.resend {
				resends--
			}
			if !d.claimed {
				claimed[d.seq] = b.cfg.Now().Add(b.cfg.LeaseTTL / 3)
				refresh = true
			}
			// A live delivery may have a next entry in its chat (the
			// answer after an edit); a re-send has none to look for.
			refresh = !d.resend || len(batch) == 0
		case <-b.outbox:
			refresh = true
		case <-due:
			refresh = true
		}
	}
}

// deliverOne delivers outbox entry e and records how it went: delivered,
// refused for good (marked, never tried again), or held for a later try.
// It first claims e, and reports false, sending nothing, if another
// sender holds the claim.
func (b *Bot) deliverOne(ctx context.Context, e prompt.OutboxEntry) bool {
	if !b.claim(ctx, e.Seq) {
		b.log.Info("outbox entry claimed by another sender; left to it", "seq", e.Seq, "conversation", e.ConversationID)
		return false
	}
	var err error
	switch e.Kind {
	case prompt.NoticeRequest:
		err = b.deliverRequest(ctx, e)
	case prompt.NoticeDecided:
		err = b.deliverDecision(ctx, e.ApprovalID)
	case prompt.NoticeVotes:
		err = b.deliverVotes(ctx, e.ApprovalID)
	case prompt.NoticeGranted:
		err = b.deliverGranted(ctx, e.PromptID, e.CallID)
	case prompt.NoticeAnswer:
		err = b.deliverAnswer(ctx, e.PromptID)
	default:
		err = fmt.Errorf("%w: unknown notice kind %q", errGiveUp, e.Kind)
	}
	if ctx.Err() != nil {
		return true // stopping: the entry stays as it is, for the next start
	}
	var note string
	switch {
	case err == nil:
	case permanent(err) || errors.Is(err, errGiveUp):
		b.log.Error("notice refused for good; not tried again", "kind", e.Kind, "conversation", e.ConversationID,
			"prompt", e.PromptID, "approval", e.ApprovalID, "err", err)
		note = "refused: " + err.Error()
	default:
		hold := holdFor(err, e.Attempts)
		b.log.Warn("notice not delivered; trying again later", "kind", e.Kind, "conversation", e.ConversationID,
			"attempt", e.Attempts+1, "in", hold, "err", err)
		if err := b.cfg.Store.HoldNotice(ctx, e.Seq, b.cfg.Now().Add(hold), err.Error()); err != nil {
			b.log.Error("hold an undelivered notice", "seq", e.Seq, "err", err)
		}
		return true
	}
	if err := b.cfg.Store.MarkNotice(ctx, e.Seq, note); err != nil {
		b.log.Error("mark a notice delivered; it may be delivered again", "seq", e.Seq, "err", err)
	}
	return true
}

// errGiveUp marks a delivery that no later try can make: its record is
// gone, say.
var errGiveUp = errors.New("cannot be delivered")

// holdFor is how long a failed delivery waits before its next try: a
// 429's retry_after, else a back-off doubling with each attempt.
func holdFor(err error, attempts int) time.Duration {
	var tooMany *tgbot.TooManyRequestsError
	if errors.As(err, &tooMany) {
		return time.Duration(max(tooMany.RetryAfter, 1)) * time.Second
	}
	d := firstHold
	for range min(attempts, 16) {
		d *= 2
	}
	return min(d, maxHold)
}

// deliverRequest shows a request with its buttons. A request decided
// before its turn came is not shown: the decision's own notice closes the
// copies there are.
func (b *Bot) deliverRequest(ctx context.Context, e prompt.OutboxEntry) error {
	req, ref, err := b.request(ctx, e.ApprovalID)
	if err != nil || ref.Status != prompt.ApprovalPending {
		return err
	}
	return b.sendApproval(ctx, req)
}

// request reads an approval's request and standing for a delivery; one
// whose record is gone can never be delivered.
func (b *Bot) request(ctx context.Context, approvalID string) (prompt.ApprovalRequest, prompt.ApprovalRef, error) {
	req, ref, err := b.cfg.Service.Request(ctx, approvalID)
	if errors.Is(err, prompt.ErrNotFound) {
		err = fmt.Errorf("%w: approval %s: %w", errGiveUp, approvalID, err)
	}
	return req, ref, err
}

// deliverDecision edits every copy of a request that left pending to show
// how it ended, without buttons.
func (b *Bot) deliverDecision(ctx context.Context, approvalID string) error {
	req, ref, err := b.request(ctx, approvalID)
	if err != nil {
		return err
	}
	return b.editApproval(ctx, approvalID, &req, nil, decidedLine(ref))
}

// deliverAnswer sends how a prompt ended.
func (b *Bot) deliverAnswer(ctx context.Context, promptID string) error {
	a, err := b.cfg.Service.Answer(ctx, promptID)
	if errors.Is(err, prompt.ErrNotFound) || errors.Is(err, prompt.ErrNotPending) {
		return fmt.Errorf("%w: %w", errGiveUp, err)
	}
	if err != nil {
		return err
	}
	return b.sendResult(ctx, a)
}

// deliverGranted sends the one line that says a call ran without asking
// and which grant allowed it.
func (b *Bot) deliverGranted(ctx context.Context, promptID, callID string) error {
	gc, err := b.cfg.Service.GrantedCall(ctx, promptID, callID)
	if errors.Is(err, prompt.ErrNotFound) {
		return fmt.Errorf("%w: %w", errGiveUp, err)
	}
	if err != nil {
		return err
	}
	chat, err := b.chatOf(ctx, gc.ConversationID)
	if err != nil {
		return fmt.Errorf("%w: no chat: %w", errGiveUp, err)
	}
	h := &htmlText{}
	h.text("🔁 Ran ").wrap("code", clip(gc.ToolName, maxNameLength)).text(" without asking: grant ").
		wrap("code", oneLine(gc.Grant.ID)).text(" allows " + grantLine(gc.Grant) + ". /grants to revoke.")
	_, err = b.send(ctx, message{chat: chat, html: h.b.String()})
	return err
}
