package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestConfigDefaults(t *testing.T) {
	cfg, err := loadConfig(envOf(map[string]string{"TELEGRAM_BOT_TOKEN": "123:abc"}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.TelegramAPIURL != "https://api.telegram.org" || cfg.LLMBaseURL != "https://api.openai.com/v1" ||
		cfg.DatabasePath != "data/tollgate.db" || cfg.LogLevel != "info" || cfg.WebfetchAllowPrivate ||
		len(cfg.allowedUsers) != 0 || cfg.LLMSystemPrompt != defaultSystemPrompt || cfg.LLMModel == "" {
		t.Fatalf("defaults = %+v", cfg)
	}
}

func TestConfigParsesEveryVariable(t *testing.T) {
	cfg, err := loadConfig(envOf(map[string]string{
		"TELEGRAM_BOT_TOKEN":       "123:abc",
		"TELEGRAM_API_URL":         "http://127.0.0.1:8081",
		"TELEGRAM_ALLOWED_USERS":   " 42, 7 ",
		"LLM_BASE_URL":             "http://localhost:11434/v1",
		"LLM_API_KEY":              "sk-x",
		"LLM_MODEL":                "llama3.1",
		"LLM_SYSTEM_PROMPT":        "be brief",
		"DATABASE_PATH":            "/tmp/x.db",
		"WEBFETCH_ALLOWED_DOMAINS": "example.com,*.go.dev",
		"WEBFETCH_ALLOW_PRIVATE":   "true",
		"LOG_LEVEL":                "debug",
		"WEBHOOK_URL":              "https://bot.example.com/hook",
		"WEBHOOK_SECRET":           "s3cret_-",
		"LISTEN_ADDR":              ":8080",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.allowedUsers) != 2 || cfg.allowedUsers[0] != 42 || cfg.allowedUsers[1] != 7 ||
		len(cfg.WebfetchDomains) != 2 || !cfg.WebfetchAllowPrivate || cfg.logLevel.String() != "DEBUG" ||
		cfg.LLMSystemPrompt != "be brief" || cfg.LLMModel != "llama3.1" {
		t.Fatalf("cfg = %+v", cfg)
	}
	for _, kv := range cfg.summary() {
		if s, ok := kv.(string); ok && (s == "123:abc" || s == "sk-x" || s == "s3cret_-") {
			t.Fatalf("summary leaks a secret: %v", cfg.summary())
		}
	}
}

func TestConfigErrorsNameTheVariable(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{}, "TELEGRAM_BOT_TOKEN is required"},
		{map[string]string{"TELEGRAM_BOT_TOKEN": "t", "TELEGRAM_ALLOWED_USERS": "42,@alice"}, `TELEGRAM_ALLOWED_USERS: "@alice" is not a numeric Telegram user ID`},
		{map[string]string{"TELEGRAM_BOT_TOKEN": "t", "TELEGRAM_ALLOWED_USERS": "-5"}, "TELEGRAM_ALLOWED_USERS"},
		{map[string]string{"TELEGRAM_BOT_TOKEN": "t", "LLM_BASE_URL": "localhost:11434"}, "LLM_BASE_URL"},
		{map[string]string{"TELEGRAM_BOT_TOKEN": "t", "TELEGRAM_API_URL": "ftp://x"}, "TELEGRAM_API_URL"},
		{map[string]string{"TELEGRAM_BOT_TOKEN": "t", "LOG_LEVEL": "loud"}, "LOG_LEVEL"},
		{map[string]string{"TELEGRAM_BOT_TOKEN": "t", "WEBFETCH_ALLOW_PRIVATE": "yes please"}, `WEBFETCH_ALLOW_PRIVATE: "yes please" is not a valid boolean`},
		{map[string]string{"TELEGRAM_BOT_TOKEN": "t", "SHUTDOWN_TIMEOUT": "soon"}, `SHUTDOWN_TIMEOUT: "soon" is not a valid duration`},
		{map[string]string{"TELEGRAM_BOT_TOKEN": "t", "WEBHOOK_URL": "https://x/h"}, "WEBHOOK_SECRET is required"},
		{map[string]string{"TELEGRAM_BOT_TOKEN": "t", "WEBHOOK_URL": "https://x/h", "WEBHOOK_SECRET": "s"}, "LISTEN_ADDR is required"},
		{map[string]string{"TELEGRAM_BOT_TOKEN": "t", "WEBHOOK_URL": "bot.example.com/h", "WEBHOOK_SECRET": "s", "LISTEN_ADDR": ":1"}, "WEBHOOK_URL"},
		{map[string]string{"TELEGRAM_BOT_TOKEN": "t", "WEBHOOK_URL": "https://x/h", "WEBHOOK_SECRET": "bad secret!", "LISTEN_ADDR": ":1"}, "WEBHOOK_SECRET must be"},
	} {
		_, err := loadConfig(envOf(tc.env))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("env %v: err = %v, want it to contain %q", tc.env, err, tc.want)
		}
	}
}

func TestEnvFileIsReadLiterallyAndTheEnvironmentWins(t *testing.T) {
	path := filepath.Join(t.TempDir(), ".env")
	content := "# comment\nTELEGRAM_BOT_TOKEN=from-file\nLLM_SYSTEM_PROMPT=Be brief; say $HOME `date` as is\nLLM_MODEL=\"quoted model\"\nLOG_LEVEL=warn\n"
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	file, err := readEnvFile(path)
	if err != nil {
		t.Fatal(err)
	}
	getenv := withFallback(envOf(map[string]string{"LOG_LEVEL": "debug"}), file)
	cfg, err := loadConfig(getenv)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.TelegramToken != "from-file" || cfg.LLMModel != "quoted model" || cfg.LogLevel != "debug" ||
		!strings.Contains(cfg.LLMSystemPrompt, "Be brief; say") || !strings.Contains(cfg.LLMSystemPrompt, "`date` as is") {
		t.Fatalf("cfg = %+v", cfg)
	}
	if _, err := readEnvFile(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Fatal("missing env file accepted")
	}
	var out strings.Builder
	if err := run(context.Background(), []string{"bot", "--env-file"}, envOf(nil), &out, &out); err == nil {
		t.Fatal("--env-file without a name accepted")
	}
}
