package bot

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/go-telegram/bot/models"
)

// Nothing Telegram hands over is lost: an update is recorded in the
// store's inbox before Telegram is told it arrived (the next getUpdates
// offset, or the webhook's 200), handled from there, and marked handled
// when its handler returns. A start handles what a crash left recorded
// and unhandled; an update delivered again is recognised by its
// update_id and not handled twice.

const (
	// inboxKeep is how long a handled update is remembered. Telegram keeps
	// an update it was not told arrived for 24 hours and may deliver it
	// again until then; twice that leaves room for clocks and slow starts.
	inboxKeep = 48 * time.Hour
	// pruneEvery is how often handled updates older than inboxKeep are
	// deleted, the first time at start.
	pruneEvery = time.Hour
	// unhandledPage is how many unhandled updates a start reads at once.
	unhandledPage = 100
	// markTimeout bounds recording that an update was handled once its
	// handler returned, even when Run's context ended meanwhile.
	markTimeout = 5 * time.Second
)

// dispatch records a batch of updates (raw as Telegram sent them, ups
// decoded from them, in the same order) in one transaction and queues for
// handling those not recorded before. An error means nothing was recorded
// and nothing queued: Telegram must be left to deliver the batch again.
// An update recorded while Run stops stays in the inbox for the next start.
func (b *Bot) dispatch(ctx context.Context, raw []json.RawMessage, ups []*models.Update) error {
	fresh, err := b.cfg.Store.RecordUpdates(ctx, raw)
	if err != nil {
		return fmt.Errorf("record %d updates: %w", len(raw), err)
	}
	isFresh := make(map[int64]bool, len(fresh))
	for _, id := range fresh {
		isFresh[id] = true
	}
	queue := make([]*models.Update, 0, len(fresh))
	for _, u := range ups {
		if !isFresh[u.ID] {
			b.log.Info("update delivered again; already recorded, not handled again", "update", u.ID)
			continue
		}
		delete(isFresh, u.ID) // the same update twice in one batch is handled once
		queue = append(queue, u)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.queueLocked(queue)
	return nil
}

// takesUpdates reports whether Run takes updates now.
func (b *Bot) takesUpdates() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state == running && b.pollCtx.Err() == nil
}

// queueLocked appends recorded updates to their chat's queue, in the order
// given, and starts a goroutine owned by Run to drain a queue that had
// none. Updates of one chat are so handled one after the other, in order:
// a message and the press after it do not race. Different chats do not
// wait for each other. Once Run stops taking updates, nothing new starts:
// what is not handled stays in the inbox for the next start. b.mu is held.
func (b *Bot) queueLocked(ups []*models.Update) {
	for _, u := range ups {
		chat := chatKey(u)
		if q, ok := b.queues[chat]; ok {
			b.queues[chat] = append(q, u)
			continue
		}
		if b.state != running || b.pollCtx.Err() != nil {
			b.log.Info("bot stopping: update left in the inbox for the next start", "update", u.ID)
			continue
		}
		b.queues[chat] = []*models.Update{u}
		poll := b.pollCtx
		b.goLocked(func(ctx context.Context) { b.drainChat(ctx, poll, chat) })
	}
}

// drainChat handles the queued updates of one chat, oldest first, and
// marks each handled when its handler returns. It stops when the queue is
// empty, or when updates stop (poll ends): the rest stay unhandled in the
// inbox, for the next start, rather than hold up the shutdown.
func (b *Bot) drainChat(ctx, poll context.Context, chat int64) {
	for {
		b.mu.Lock()
		q := b.queues[chat]
		if len(q) == 0 || poll.Err() != nil {
			if len(q) > 0 {
				b.log.Info("bot stopping: updates left in the inbox for the next start", "chat", chat, "updates", len(q))
			}
			delete(b.queues, chat)
			b.mu.Unlock()
			return
		}
		u := q[0]
		b.mu.Unlock()

		b.handleUpdate(ctx, u)
		b.markHandled(ctx, u.ID)

		b.mu.Lock()
		b.queues[chat] = b.queues[chat][1:]
		b.mu.Unlock()
	}
}

// markHandled records that an update's handler returned. It does so even
// if Run's context ended meanwhile: the handler did what it could, and
// handling it again at the next start could act on it twice. A failure
// leaves it to the next start, which handles it again.
func (b *Bot) markHandled(ctx context.Context, id int64) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), markTimeout)
	defer cancel()
	if err := b.cfg.Store.MarkHandled(ctx, id); err != nil {
		b.log.Error("update handled but not recorded so; the next start handles it again", "update", id, "err", err)
	}
}

// chatKey is the chat an update belongs to, whose updates are handled in
// order: the chat of a message, or of the message a button is on.
func chatKey(u *models.Update) int64 {
	switch {
	case u.Message != nil:
		return u.Message.Chat.ID
	case u.CallbackQuery != nil:
		switch m := u.CallbackQuery.Message; {
		case m.Message != nil:
			return m.Message.Chat.ID
		case m.InaccessibleMessage != nil:
			return m.InaccessibleMessage.Chat.ID
		}
		return u.CallbackQuery.From.ID
	}
	return 0 // nothing the bot handles: one queue for all of them
}

// unhandledUpdates reads, oldest first, the updates a crash left recorded
// and not handled. A failure is logged, not fatal: they stay in the
// inbox, for the next start.
func (b *Bot) unhandledUpdates(ctx context.Context) []*models.Update {
	var out []*models.Update
	var after int64
	for {
		page, err := b.cfg.Store.UnhandledUpdates(ctx, after, unhandledPage)
		if err != nil {
			if ctx.Err() == nil {
				b.log.Error("read updates a crash left unhandled; they stay for the next start", "err", err)
			}
			return out
		}
		for _, raw := range page {
			u, err := decodeUpdate(raw)
			if u.ID <= 0 {
				// The store records none without one; reading on from
				// here could not move past it.
				b.log.Error("recorded update without update_id; the rest stay for the next start", "err", err)
				return out
			}
			if err != nil {
				b.log.Error("recorded update unreadable; marked handled, not handled", "update", u.ID, "err", err)
			}
			out = append(out, u)
			after = u.ID
		}
		if len(page) < unhandledPage {
			if len(out) > 0 {
				b.log.Info("handling updates a crash left unhandled", "updates", len(out))
			}
			return out
		}
	}
}

// decodeUpdate decodes an update as Telegram sent it. One the library
// cannot read comes back with only its ID, and an error: it is recorded
// (so that its ID is known when it comes again) and handled as nothing.
func decodeUpdate(raw json.RawMessage) (*models.Update, error) {
	u := &models.Update{}
	err := json.Unmarshal(raw, u)
	if err == nil && u.ID > 0 {
		return u, nil
	}
	var head struct {
		ID int64 `json:"update_id"`
	}
	if herr := json.Unmarshal(raw, &head); herr != nil || head.ID <= 0 {
		return &models.Update{}, fmt.Errorf("update without update_id: %w", err)
	}
	return &models.Update{ID: head.ID}, fmt.Errorf("decode update %d: %w", head.ID, err)
}

// pruneInbox deletes handled updates older than inboxKeep at start and
// every pruneEvery until ctx ends. A failure is logged and tried again at
// the next tick: the inbox only grows meanwhile.
func (b *Bot) pruneInbox(ctx context.Context) {
	t := time.NewTicker(pruneEvery)
	defer t.Stop()
	for {
		n, err := b.cfg.Store.PruneUpdates(ctx, inboxKeep)
		switch {
		case err != nil && ctx.Err() == nil:
			b.log.Warn("prune handled updates", "err", err)
		case n > 0:
			b.log.Debug("pruned handled updates", "deleted", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
