package bot_test

import (
	"context"
	"strings"
	"testing"

	"tollgate/bot"
	"tollgate/prompt"
	"tollgate/prompt/prompttest"
)

func TestNewRejectsBadConfig(t *testing.T) {
	pstore := prompttest.NewStore()
	svc, err := prompt.NewService(prompt.Config{Model: prompttest.NewModel(), Store: pstore})
	if err != nil {
		t.Fatal(err)
	}
	store := newMemStore(pstore, newCallLog())
	for name, cfg := range map[string]bot.Config{
		"no token":          {Service: svc, Store: store},
		"no store":          {Token: token, Service: svc},
		"webhook no secret": {Token: token, Service: svc, Store: store, Webhook: bot.Webhook{URL: "https://x.example/hook"}},
		"unknown notify":    {Token: token, Service: svc, Store: store, Notify: "email"},
	} {
		if _, err := bot.New(cfg); err == nil {
			t.Errorf("%s: New accepted it", name)
		}
	}
}

func TestRunReportsABadToken(t *testing.T) {
	h := newHarness(t, nil, func(c *config) { c.Token = "42:wrong" })
	err := h.bot.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "TELEGRAM_BOT_TOKEN") {
		t.Errorf("Run = %v, want a message naming TELEGRAM_BOT_TOKEN", err)
	}
}
