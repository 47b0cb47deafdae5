package telegramtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-telegram/bot/models"
)

// Call is one request the server received, as Telegram would see it.
type Call struct {
	Method string
	// Params holds every form field as sent; JSON-valued fields such as
	// reply_markup hold their JSON text.
	Params map[string]string
	// Files holds uploaded files by field name.
	Files map[string]File
	// Status is the HTTP status answered; Description the error text when
	// the answer was not ok.
	Status      int
	Description string
	// Result is the JSON of the result when the answer was ok.
	Result json.RawMessage
	// Time is when the request arrived.
	Time time.Time
}

// File is an uploaded file.
type File struct {
	Name string
	Data []byte
}

// OK reports whether the call was answered {"ok":true}.
func (c Call) OK() bool { return c.Status == http.StatusOK }

// Param returns a form field, or "".
func (c Call) Param(name string) string { return c.Params[name] }

// Int returns a form field as an integer, or 0.
func (c Call) Int(name string) int64 {
	n, _ := strconv.ParseInt(c.Params[name], 10, 64)
	return n
}

// Decode unmarshals the JSON text of form field name into v.
func (c Call) Decode(name string, v any) error {
	s, ok := c.Params[name]
	if !ok {
		return fmt.Errorf("no field %s in %s", name, c.Method)
	}
	return json.Unmarshal([]byte(s), v)
}

// Message decodes the result of a call that returned a message.
func (c Call) Message() (models.Message, error) {
	var m models.Message
	err := json.Unmarshal(c.Result, &m)
	return m, err
}

// Method returns a predicate for WaitCall and Calls that matches calls of
// method m (answered ok or not) for which every extra predicate holds.
func Method(m string, and ...func(Call) bool) func(Call) bool {
	return func(c Call) bool {
		if !strings.EqualFold(c.Method, m) {
			return false
		}
		for _, f := range and {
			if !f(c) {
				return false
			}
		}
		return true
	}
}

// Succeeded matches calls answered ok.
func Succeeded(c Call) bool { return c.OK() }

// Fault is a forced error answer.
type Fault struct {
	Code        int
	Description string
	RetryAfter  int // seconds, sent as parameters.retry_after
}

// TooManyRequests is Telegram's flood-control answer.
func TooManyRequests(retryAfter int) Fault {
	return Fault{Code: http.StatusTooManyRequests, Description: fmt.Sprintf("Too Many Requests: retry after %d", retryAfter), RetryAfter: retryAfter}
}

// ServerError is a 5xx answer.
func ServerError() Fault {
	return Fault{Code: http.StatusInternalServerError, Description: "Internal Server Error"}
}

// BadRequest is a 400 answer with the given description.
func BadRequest(description string) Fault {
	return Fault{Code: http.StatusBadRequest, Description: "Bad Request: " + description}
}

type apiError struct {
	code       int
	desc       string
	retryAfter int
}

func (e *apiError) Error() string { return e.desc }

func badRequest(format string, args ...any) *apiError {
	return &apiError{code: http.StatusBadRequest, desc: "Bad Request: " + fmt.Sprintf(format, args...)}
}

type chat struct {
	info     models.Chat
	nextID   int
	messages map[int]*models.Message
}

// Server is a fake Telegram Bot API for one bot token. It parses requests as
// Telegram does (multipart, url-encoded or JSON bodies, or the query string),
// validates what Telegram validates, keeps chats and messages, and records
// every call. Its methods are safe for concurrent use.
type Server struct {
	t     testing.TB
	token string
	bot   models.User
	hs    *httptest.Server

	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once

	mu             sync.Mutex
	changed        chan struct{} // closed and replaced on every change
	calls          []Call
	faults         map[string][]Fault
	updates        []*models.Update         // not yet confirmed, by update_id
	sent           map[int64]*models.Update // every update queued, for Replay
	nextUpdateID   int64
	allowedUpdates []string
	poller         chan struct{} // closed to end the running getUpdates
	chats          map[int64]*chat
	users          map[int64]models.User // everyone seen, in any chat
	callbacks      map[string]bool       // query ID → answered
	nextCallback   int
	nextFile       int
	commands       []models.BotCommand
	webhookURL     string
	webhookSecret  string
	deliveries     []Delivery
	now            func() time.Time // UseClock's, else time.Now
	rates          *rateEnforcer    // nil unless EnforceRates
}

// Delivery is one attempt to post an update to the webhook.
type Delivery struct {
	UpdateID int64
	Status   int // 0 when the request failed
}

// NewServer starts a fake Bot API for token; it stops when the test ends.
// The bot's ID is the number before the token's colon.
func NewServer(t testing.TB, token string) *Server {
	t.Helper()
	id, _ := strconv.ParseInt(strings.SplitN(token, ":", 2)[0], 10, 64)
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		t:            t,
		token:        token,
		bot:          models.User{ID: id, IsBot: true, FirstName: "Test Bot", Username: "test_bot"},
		cancel:       cancel,
		changed:      make(chan struct{}),
		faults:       map[string][]Fault{},
		chats:        map[int64]*chat{},
		users:        map[int64]models.User{},
		callbacks:    map[string]bool{},
		sent:         map[int64]*models.Update{},
		nextUpdateID: 1000,
		now:          time.Now,
	}
	s.hs = httptest.NewServer(s)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.deliverLoop(ctx)
	}()
	t.Cleanup(s.Close)
	return s
}

// Close stops the server. It is called when the test ends.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		s.cancel()
		s.hs.CloseClientConnections()
		s.hs.Close()
		s.wg.Wait()
	})
}

// URL is the server's base URL, for WithServerURL or TELEGRAM_API_URL.
func (s *Server) URL() string { return s.hs.URL }

// Bot returns the bot user getMe answers.
func (s *Server) Bot() models.User { return s.bot }

func (s *Server) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// Fail makes the next n calls of method answer f instead of being served.
func (s *Server) Fail(method string, n int, f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := strings.ToLower(method)
	for range n {
		s.faults[key] = append(s.faults[key], f)
	}
}

// Calls returns the calls that match (all calls if match is nil), in order.
func (s *Server) Calls(match func(Call) bool) []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Call
	for _, c := range s.calls {
		if match == nil || match(c) {
			out = append(out, c)
		}
	}
	return out
}

// Await waits up to timeout until n calls match and returns the first n,
// or what matched so far and false. Unlike WaitCalls it may be called from
// any goroutine.
func (s *Server) Await(timeout time.Duration, n int, match func(Call) bool) ([]Call, bool) {
	return awaitN(s, timeout, n, func() []Call { return filter(s.calls, match) })
}

// awaitN waits up to timeout until collect, run with s.mu held, finds n
// items, and returns the first n, or what it found so far and false.
func awaitN[T any](s *Server, timeout time.Duration, n int, collect func() []T) ([]T, bool) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		out := collect()
		ch := s.changed
		s.mu.Unlock()
		if len(out) >= n {
			return out[:n], true
		}
		select {
		case <-ch:
		case <-deadline.C:
			return out, false
		}
	}
}

func filter[T any](all []T, match func(T) bool) []T {
	var out []T
	for _, x := range all {
		if match(x) {
			out = append(out, x)
		}
	}
	return out
}

// WaitCalls waits until n calls match, and returns the first n; it fails
// the test after timeout. Call it from the test's goroutine.
func (s *Server) WaitCalls(t testing.TB, timeout time.Duration, n int, match func(Call) bool) []Call {
	t.Helper()
	out, ok := s.Await(timeout, n, match)
	if !ok {
		t.Fatalf("telegramtest: %d of %d expected calls after %v; calls: %s", len(out), n, timeout, s.summary())
	}
	return out
}

// WaitCall waits for the first call that matches; see WaitCalls.
func (s *Server) WaitCall(t testing.TB, timeout time.Duration, match func(Call) bool) Call {
	t.Helper()
	return s.WaitCalls(t, timeout, 1, match)[0]
}

func (s *Server) summary() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	for _, c := range s.calls {
		if strings.EqualFold(c.Method, "getUpdates") && c.OK() {
			continue
		}
		fmt.Fprintf(&b, "\n  %s %d %s %q", c.Method, c.Status, c.Description, c.Params["text"])
	}
	return b.String()
}

// Message returns message id of chat chatID as it is now.
func (s *Server) Message(chatID int64, id int) (models.Message, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.chats[chatID]
	if c == nil || c.messages[id] == nil {
		return models.Message{}, false
	}
	return *c.messages[id], true
}

// Messages returns the messages of a chat, users' and the bot's, oldest first.
func (s *Server) Messages(chatID int64) []models.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.chats[chatID]
	if c == nil {
		return nil
	}
	var out []models.Message
	for id := 1; id < c.nextID; id++ {
		if m := c.messages[id]; m != nil {
			out = append(out, *m)
		}
	}
	return out
}

// Commands returns the command menu last set with setMyCommands.
func (s *Server) Commands() []models.BotCommand {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.commands)
}

// Webhook returns the webhook URL and secret set, "" if none.
func (s *Server) Webhook() (url, secret string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.webhookURL, s.webhookSecret
}

// Deliveries returns the webhook delivery attempts so far.
func (s *Server) Deliveries() []Delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.deliveries)
}

// PendingUpdates counts the updates not yet confirmed by getUpdates or
// delivered to the webhook.
func (s *Server) PendingUpdates() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.updates)
}

// KnownChat makes chat chatID known as if from had written to the bot
// before the test began (before a restart, say), without an update: the bot
// may send to it at once.
func (s *Server) KnownChat(chatID int64, from models.User) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.chatLocked(chatID, from)
}

func (s *Server) chatLocked(chatID int64, from models.User) *chat {
	s.users[from.ID] = from
	c := s.chats[chatID]
	if c == nil {
		info := models.Chat{ID: chatID, Type: models.ChatTypePrivate, FirstName: from.FirstName, LastName: from.LastName, Username: from.Username}
		if chatID != from.ID {
			info = groupInfo(chatID)
		}
		c = &chat{info: info, nextID: 1, messages: map[int]*models.Message{}}
		s.chats[chatID] = c
	}
	return c
}

func (s *Server) pushLocked(u *models.Update) {
	s.nextUpdateID++
	u.ID = s.nextUpdateID
	s.updates = append(s.updates, u)
	s.sent[u.ID] = u
	s.notifyLocked()
}

// Queued returns the updates not yet confirmed (by a getUpdates offset
// above them, or a webhook's 2xx), oldest first: what Telegram would
// deliver again.
func (s *Server) Queued() []models.Update {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]models.Update, 0, len(s.updates))
	for _, u := range s.updates {
		out = append(out, *u)
	}
	return out
}

// Replay queues update id again, with its update_id, in update_id order,
// as Telegram does when it did not learn that a delivery arrived: a
// webhook answer lost on its way back, say. A poller's next offset above
// id forgets it again, as Telegram forgets every update below the offset.
// It reports false if no such update was ever queued.
func (s *Server) Replay(id int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	u, ok := s.sent[id]
	if !ok {
		return false
	}
	i := 0
	for i < len(s.updates) && s.updates[i].ID < id {
		i++
	}
	if i < len(s.updates) && s.updates[i].ID == id {
		return true // still queued
	}
	s.updates = slices.Insert(s.updates, i, u)
	s.notifyLocked()
	return true
}

// AwaitConfirmed waits up to timeout until update id is no longer queued:
// a getUpdates offset above it (or a webhook's 2xx) confirmed it. Unlike a
// wait for the confirming getUpdates call, which is recorded only when it
// returns, it sees a long poll still waiting. It reports whether it was.
func (s *Server) AwaitConfirmed(timeout time.Duration, id int64) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		queued := slices.ContainsFunc(s.updates, func(u *models.Update) bool { return u.ID == id })
		ch := s.changed
		s.mu.Unlock()
		if !queued {
			return true
		}
		select {
		case <-ch:
		case <-deadline.C:
			return false
		}
	}
}

// AwaitDeliveries waits up to timeout until n webhook deliveries match and
// returns the first n, or what matched so far and false.
func (s *Server) AwaitDeliveries(timeout time.Duration, n int, match func(Delivery) bool) ([]Delivery, bool) {
	return awaitN(s, timeout, n, func() []Delivery { return filter(s.deliveries, match) })
}

// UserMessage makes user from send text to chat chatID (a private chat when
// chatID is from.ID, else a group: see groups.go) and queues the update. A
// leading /command gets its bot_command entity and each @username a
// mention entity, as Telegram adds them.
func (s *Server) UserMessage(chatID int64, from models.User, text string) models.Message {
	return s.userMessage(chatID, from, 0, text)
}

// UserReply is UserMessage replying to message replyTo of the chat.
func (s *Server) UserReply(chatID int64, from models.User, replyTo int, text string) models.Message {
	return s.userMessage(chatID, from, replyTo, text)
}

func (s *Server) userMessage(chatID int64, from models.User, replyTo int, text string) models.Message {
	return s.userMessageWith(chatID, from, replyTo, text, nil)
}

// userMessageWith is userMessage with a last change to the message (an
// entity a client adds) before it is kept and queued.
func (s *Server) userMessageWith(chatID int64, from models.User, replyTo int, text string, change func(*models.Message)) models.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.chatLocked(chatID, from)
	m := &models.Message{ID: c.nextID, From: &from, Date: int(time.Now().Unix()), Chat: c.info, Text: text}
	c.nextID++
	if strings.HasPrefix(text, "/") {
		n := strings.IndexAny(text, " \n")
		if n < 0 {
			n = len(text)
		}
		m.Entities = []models.MessageEntity{{Type: models.MessageEntityTypeBotCommand, Offset: 0, Length: utf16Len(text[:n])}}
	}
	m.Entities = append(m.Entities, mentions(text)...)
	if replyTo != 0 {
		orig := c.messages[replyTo]
		if orig == nil {
			s.t.Errorf("telegramtest: reply to unknown message %d in chat %d", replyTo, chatID)
		} else {
			cp := *orig
			m.ReplyToMessage = &cp
		}
	}
	if change != nil {
		change(m)
	}
	c.messages[m.ID] = m
	cp := *m
	s.pushLocked(&models.Update{Message: &cp})
	return *m
}

// Press makes user from press an inline button carrying data on message
// messageID of chat chatID, and returns the callback query's ID. The data
// need not be on the message: a client can send any data, which is what a
// forged press is.
func (s *Server) Press(chatID int64, from models.User, messageID int, data string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.chatLocked(chatID, from)
	s.nextCallback++
	id := fmt.Sprintf("cb%d", s.nextCallback)
	s.callbacks[id] = false
	q := &models.CallbackQuery{ID: id, From: from, ChatInstance: strconv.FormatInt(chatID, 10), Data: data}
	if m := c.messages[messageID]; m != nil {
		cp := *m
		q.Message = models.MaybeInaccessibleMessage{Type: models.MaybeInaccessibleMessageTypeMessage, Message: &cp}
	} else {
		q.Message = models.MaybeInaccessibleMessage{Type: models.MaybeInaccessibleMessageTypeInaccessibleMessage,
			InaccessibleMessage: &models.InaccessibleMessage{Chat: c.info, MessageID: messageID}}
	}
	s.pushLocked(&models.Update{CallbackQuery: q})
	return id
}

// CallbackAnswered reports whether callback query id was answered.
func (s *Server) CallbackAnswered(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.callbacks[id]
}

// ServeHTTP serves /bot<token>/<method>.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/bot")
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]any{"ok": false, "error_code": 404, "description": "Not Found"})
		return
	}
	token, method, _ := strings.Cut(rest, "/")
	if token != s.token {
		writeJSON(w, http.StatusUnauthorized, map[string]any{"ok": false, "error_code": 401, "description": "Unauthorized"})
		return
	}
	call := Call{Method: method, Time: s.clockNow()}
	params, files, err := parseParams(r)
	call.Params, call.Files = params, files
	// Read the body to its end: only then does net/http watch the
	// connection and cancel r.Context() when the client goes away, which a
	// long poll of a killed bot must notice (else Close waits out its
	// timeout).
	_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20))
	var result any
	var aerr *apiError
	switch {
	case err != nil:
		aerr = badRequest("%v", err)
	default:
		aerr = s.takeFault(method)
		if aerr == nil {
			aerr = s.enforceRates(call)
		}
		if aerr == nil {
			result, aerr = s.serve(r.Context(), call)
		}
	}
	if aerr != nil {
		call.Status, call.Description = aerr.code, aerr.desc
		body := map[string]any{"ok": false, "error_code": aerr.code, "description": aerr.desc}
		if aerr.retryAfter > 0 {
			body["parameters"] = map[string]any{"retry_after": aerr.retryAfter}
		}
		s.record(call)
		writeJSON(w, aerr.code, body)
		return
	}
	raw, err := json.Marshal(result)
	if err != nil {
		s.t.Errorf("telegramtest: marshal %s result: %v", method, err)
	}
	call.Status, call.Result = http.StatusOK, raw
	s.record(call)
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "result": json.RawMessage(raw)})
}

func (s *Server) record(c Call) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, c)
	s.notifyLocked()
}

func (s *Server) takeFault(method string) *apiError {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := strings.ToLower(method)
	q := s.faults[key]
	if len(q) == 0 {
		return nil
	}
	f := q[0]
	s.faults[key] = q[1:]
	return &apiError{code: f.Code, desc: f.Description, retryAfter: f.RetryAfter}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// parseParams reads parameters the ways Telegram accepts them: query
// string, then a url-encoded, multipart or JSON body.
func parseParams(r *http.Request) (map[string]string, map[string]File, error) {
	params := map[string]string{}
	files := map[string]File{}
	for k, v := range r.URL.Query() {
		params[k] = v[0]
	}
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch ct {
	case "multipart/form-data":
		if err := r.ParseMultipartForm(64 << 20); err != nil {
			// A multipart body without any part is how clients send no
			// parameters; Telegram takes it as such.
			if errors.Is(err, io.EOF) || strings.HasSuffix(err.Error(), "EOF") {
				return params, files, nil
			}
			return nil, nil, fmt.Errorf("can't parse multipart body: %v", err)
		}
		for k, v := range r.MultipartForm.Value {
			params[k] = v[0]
		}
		for k, fhs := range r.MultipartForm.File {
			data, err := readPart(fhs[0])
			if err != nil {
				return nil, nil, err
			}
			files[k] = File{Name: fhs[0].Filename, Data: data}
		}
	case "application/x-www-form-urlencoded":
		if err := r.ParseForm(); err != nil {
			return nil, nil, fmt.Errorf("can't parse form body: %v", err)
		}
		for k, v := range r.PostForm {
			params[k] = v[0]
		}
	case "application/json":
		var m map[string]json.RawMessage
		if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
			return nil, nil, fmt.Errorf("can't parse JSON body: %v", err)
		}
		for k, v := range m {
			var str string
			if json.Unmarshal(v, &str) == nil {
				params[k] = str
			} else {
				params[k] = string(v)
			}
		}
	}
	return params, files, nil
}

func readPart(fh *multipart.FileHeader) ([]byte, error) {
	f, err := fh.Open()
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// deliverLoop posts queued updates to the webhook, one at a time and in
// order, as Telegram does, retrying a failed one.
func (s *Server) deliverLoop(ctx context.Context) {
	client := &http.Client{Timeout: 10 * time.Second}
	for {
		s.mu.Lock()
		u, target, secret, ch := (*models.Update)(nil), s.webhookURL, s.webhookSecret, s.changed
		if target != "" && len(s.updates) > 0 {
			u = s.updates[0]
		}
		var body []byte
		if u != nil {
			body, _ = json.Marshal(u)
		}
		s.mu.Unlock()
		if u == nil {
			select {
			case <-ctx.Done():
				return
			case <-ch:
			}
			continue
		}
		status := 0
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
		if err == nil {
			req.Header.Set("Content-Type", "application/json")
			if secret != "" {
				req.Header.Set("X-Telegram-Bot-Api-Secret-Token", secret)
			}
			if resp, err := client.Do(req); err == nil {
				status = resp.StatusCode
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}
		s.mu.Lock()
		s.deliveries = append(s.deliveries, Delivery{UpdateID: u.ID, Status: status})
		if status/100 == 2 && len(s.updates) > 0 && s.updates[0] == u {
			s.updates = s.updates[1:]
		}
		s.notifyLocked()
		s.mu.Unlock()
		if status/100 != 2 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
}
