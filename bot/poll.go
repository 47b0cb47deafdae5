package bot

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-telegram/bot/models"
)

// The bot long-polls getUpdates itself rather than through the library,
// whose polling asks for the next batch (confirming this one) before the
// handlers of this one run: a crash in between lost the updates. Here the
// offset moves past a batch only once the batch is recorded in the inbox.
// https://core.telegram.org/bots/api#getupdates

const (
	// pollLimit is the most updates one getUpdates returns (Telegram's
	// maximum): one batch, one transaction.
	pollLimit = 100
	// maxUpdatesBody bounds a getUpdates answer: 100 updates of at most a
	// few kilobytes each, with a wide margin.
	maxUpdatesBody = 32 << 20
)

// allowedUpdates are the kinds of update the bot handles; Telegram drops
// the others rather than deliver them.
const allowedUpdates = `["message","callback_query"]`

// apiError is an answer of Telegram with "ok": false.
type apiError struct {
	Code        int
	Description string
	RetryAfter  time.Duration // from parameters.retry_after, on 429
}

func (e *apiError) Error() string {
	return fmt.Sprintf("telegram answered %d: %s", e.Code, e.Description)
}

// poll takes updates with getUpdates until ctx ends. Each batch is
// recorded (and its new updates queued) before the next call's offset
// confirms it to Telegram; a batch that cannot be recorded is asked for
// again, as the offset did not move. Failures wait Limits.Backoff,
// doubling up to Limits.MaxBackoff, or as long as a 429 asks.
func (b *Bot) poll(ctx context.Context) {
	// No offset at first: Telegram sends every update it was not told
	// arrived, which after a crash includes some already recorded; the
	// inbox recognises those. A stored offset could not be trusted:
	// Telegram may number updates afresh after a week without any.
	var offset int64
	var backoff time.Duration
	for {
		if backoff > 0 {
			t := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		raw, err := b.getUpdates(ctx, offset)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			backoff = b.nextBackoff(backoff, err)
			b.logPollError(err, backoff)
			continue
		}
		if len(raw) == 0 {
			backoff = 0
			continue
		}
		batch, ups, next := b.decodeBatch(raw, offset)
		if len(batch) > 0 {
			if err := b.dispatch(ctx, batch, ups); err != nil {
				if ctx.Err() != nil {
					return
				}
				backoff = b.nextBackoff(backoff, err)
				b.log.Error("updates not recorded; asking Telegram for them again", "updates", len(batch), "retry_in", backoff, "err", err)
				continue
			}
		}
		offset, backoff = next, 0
	}
}

// decodeBatch decodes a getUpdates result and returns the updates to
// record, decoded, and the offset that confirms them all. An update
// without update_id, which Telegram never sends, is logged and left out.
func (b *Bot) decodeBatch(raw []json.RawMessage, offset int64) ([]json.RawMessage, []*models.Update, int64) {
	batch := make([]json.RawMessage, 0, len(raw))
	ups := make([]*models.Update, 0, len(raw))
	next := offset
	for _, r := range raw {
		u, err := decodeUpdate(r)
		if u.ID <= 0 {
			b.log.Error("getUpdates: update without update_id; skipped", "err", err)
			continue
		}
		if err != nil {
			b.log.Error("getUpdates: update unreadable; recorded, not handled", "update", u.ID, "err", err)
		}
		batch = append(batch, r)
		ups = append(ups, u)
		next = max(next, u.ID+1)
	}
	return batch, ups, next
}

// nextBackoff is the wait after a failure that followed a wait of prev.
func (b *Bot) nextBackoff(prev time.Duration, err error) time.Duration {
	next := min(max(prev*2, b.cfg.Limits.Backoff), b.cfg.Limits.MaxBackoff)
	var ae *apiError
	if errors.As(err, &ae) && ae.RetryAfter > next {
		next = ae.RetryAfter
	}
	return next
}

// logPollError says what a failed getUpdates means for the operator: a
// conflict and a refused token need someone to act; the rest pass.
func (b *Bot) logPollError(err error, retryIn time.Duration) {
	var ae *apiError
	switch {
	case errors.As(err, &ae) && ae.Code == http.StatusConflict:
		b.log.Error("getUpdates refused: another process is taking this bot's updates (a second instance polling, "+
			"or a webhook set); stop the other one", "retry_in", retryIn, "err", err)
	case errors.As(err, &ae) && ae.Code == http.StatusUnauthorized:
		b.log.Error("getUpdates refused: Telegram no longer accepts the bot token (revoked?); set a valid TELEGRAM_BOT_TOKEN",
			"retry_in", retryIn, "err", err)
	default:
		b.log.Warn("getUpdates failed; retrying", "retry_in", retryIn, "err", err)
	}
}

// getUpdates asks Telegram for the updates from offset on (0: from the
// first it was not told arrived), waiting up to PollTimeout for one. The
// request is multipart/form-data, as the library sends every call.
func (b *Bot) getUpdates(ctx context.Context, offset int64) ([]json.RawMessage, error) {
	var body bytes.Buffer
	form := multipart.NewWriter(&body)
	fields := [][2]string{
		{"limit", strconv.Itoa(pollLimit)},
		// Whole seconds, at least one: 0 would be short polling, a busy loop.
		{"timeout", strconv.Itoa(max(1, int(b.cfg.PollTimeout/time.Second)))},
		{"allowed_updates", allowedUpdates},
	}
	if offset != 0 {
		fields = append(fields, [2]string{"offset", strconv.FormatInt(offset, 10)})
	}
	for _, f := range fields {
		if err := form.WriteField(f[0], f[1]); err != nil {
			return nil, fmt.Errorf("getUpdates: build request: %w", err)
		}
	}
	if err := form.Close(); err != nil {
		return nil, fmt.Errorf("getUpdates: build request: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.cfg.APIURL+"/bot"+b.cfg.Token+"/getUpdates", &body)
	if err != nil {
		return nil, fmt.Errorf("getUpdates: %w", b.redact(err))
	}
	req.Header.Set("Content-Type", form.FormDataContentType())
	resp, err := b.cfg.HTTPClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("getUpdates: %w", b.redact(err))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxUpdatesBody))
	if err != nil {
		return nil, fmt.Errorf("getUpdates: read answer: %w", b.redact(err))
	}
	var r struct {
		OK          bool              `json:"ok"`
		Result      []json.RawMessage `json:"result"`
		ErrorCode   int               `json:"error_code"`
		Description string            `json:"description"`
		Parameters  struct {
			RetryAfter int `json:"retry_after"`
		} `json:"parameters"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("getUpdates: HTTP %d with an unreadable answer: %w", resp.StatusCode, err)
	}
	if !r.OK {
		code := r.ErrorCode
		if code == 0 {
			code = resp.StatusCode
		}
		return nil, fmt.Errorf("getUpdates: %w", &apiError{Code: code, Description: r.Description,
			RetryAfter: time.Duration(r.Parameters.RetryAfter) * time.Second})
	}
	return r.Result, nil
}

// redact removes the bot token from an error of the HTTP client, which
// quotes the URL, so that logs never hold it.
func (b *Bot) redact(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		ue.URL = strings.ReplaceAll(ue.URL, b.cfg.Token, "***")
	}
	return err
}
