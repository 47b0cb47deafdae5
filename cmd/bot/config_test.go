package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caarlos0/env/v11"

	"tollgate/bot"
	"tollgate/llm"
)

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestConfigDefaults(t *testing.T) {
	cfg, err := loadConfig(envOf(map[string]string{"TELEGRAM_BOT_TOKEN": "123:abc"}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.DatabasePath != "data/tollgate.db" || cfg.LogLevel != "info" || cfg.WebfetchAllowPrivate ||
		len(cfg.allowedUsers) != 0 || cfg.LLMSystemPrompt != defaultSystemPrompt || cfg.LLMModel == "" ||
		cfg.ShutdownTimeout != 30*time.Second {
		t.Fatalf("defaults = %+v", cfg)
	}
	// Defaults a constructor owns are passed on unset, so that one applies.
	if cfg.TelegramAPIURL != "" || cfg.LLMBaseURL != "" || cfg.LLMTimeout != 0 || cfg.AgentWorkers != 0 {
		t.Fatalf("constructor-owned settings were given a value: %+v", cfg)
	}
	// The start-up line still shows what the bot will use.
	sum := summaryMap(cfg)
	if sum["llm_base_url"] != llm.DefaultBaseURL || sum["telegram_api_url"] != "(default)" || sum["agent_workers"] != "(default)" {
		t.Fatalf("summary = %v", sum)
	}
}

// summaryMap turns the summary's key-value list into a map.
func summaryMap(cfg config) map[string]any {
	kv := cfg.summary()
	m := map[string]any{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	return m
}

func TestLLMTimeoutZeroMeansLLMsDefault(t *testing.T) {
	cfg, err := loadConfig(envOf(map[string]string{"TELEGRAM_BOT_TOKEN": "t", "LLM_TIMEOUT": "0s"}))
	if err != nil || cfg.LLMTimeout != 0 {
		t.Fatalf("LLM_TIMEOUT=0s: %v, %v; want it passed on as 0", cfg.LLMTimeout, err)
	}
	cfg, err = loadConfig(envOf(map[string]string{"TELEGRAM_BOT_TOKEN": "t", "LLM_TIMEOUT": "5m"}))
	if err != nil || cfg.LLMTimeout != 5*time.Minute {
		t.Fatalf("LLM_TIMEOUT=5m: %v, %v", cfg.LLMTimeout, err)
	}
	// README promises 120s; it is llm's default now, not this package's.
	if llm.DefaultTimeout != 120*time.Second {
		t.Fatalf("llm.DefaultTimeout = %v; README documents 120s", llm.DefaultTimeout)
	}
}

func TestAgentWorkers(t *testing.T) {
	for _, tc := range []struct {
		value string
		want  int
		err   string
	}{
		{"", 0, ""}, // unset: the prompt service's default
		{"0", 0, ""},
		{"4", 4, ""},
		{"64", 64, ""},
		{"-1", 0, "AGENT_WORKERS: -1 must not be negative"},
		{"lots", 0, `AGENT_WORKERS: "lots" is not a valid whole number`},
		{"2.5", 0, `AGENT_WORKERS: "2.5" is not a valid whole number`},
	} {
		cfg, err := loadConfig(envOf(map[string]string{"TELEGRAM_BOT_TOKEN": "t", "AGENT_WORKERS": tc.value}))
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("AGENT_WORKERS=%q: err = %v, want it to contain %q", tc.value, err, tc.err)
			}
		case err != nil:
			t.Errorf("AGENT_WORKERS=%q: %v", tc.value, err)
		case cfg.AgentWorkers != tc.want:
			t.Errorf("AGENT_WORKERS=%q: AgentWorkers = %d, want %d", tc.value, cfg.AgentWorkers, tc.want)
		}
	}
	cfg, err := loadConfig(envOf(map[string]string{"TELEGRAM_BOT_TOKEN": "t", "AGENT_WORKERS": "4"}))
	if err != nil {
		t.Fatal(err)
	}
	if got := summaryMap(cfg)["agent_workers"]; got != 4 {
		t.Errorf("summary agent_workers = %v, want 4", got)
	}
}

// TestMissingKeyWarningWithDefaultBaseURL: LLM_BASE_URL unset means
// OpenAI's endpoint, so an empty key still earns the warning.
func TestMissingKeyWarningWithDefaultBaseURL(t *testing.T) {
	var stdout, stderr strings.Builder
	// A database path the store refuses ends run right after the warnings.
	err := run(context.Background(), []string{"bot"},
		envOf(map[string]string{"TELEGRAM_BOT_TOKEN": "t", "DATABASE_PATH": "file:x.db"}), &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "DATABASE_PATH") {
		t.Fatalf("run: %v; want the database error", err)
	}
	if !strings.Contains(stderr.String(), "LLM_API_KEY is empty but LLM_BASE_URL is OpenAI's") {
		t.Fatalf("no warning about the missing key in:\n%s", stderr.String())
	}
	if !strings.Contains(stderr.String(), "llm_base_url="+llm.DefaultBaseURL) {
		t.Fatalf("start-up line does not show the default endpoint:\n%s", stderr.String())
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
		"APPROVAL_NOTIFY":          "dm",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.allowedUsers) != 2 || cfg.allowedUsers[0] != 42 || cfg.allowedUsers[1] != 7 ||
		len(cfg.WebfetchDomains) != 2 || !cfg.WebfetchAllowPrivate || cfg.logLevel.String() != "DEBUG" ||
		cfg.LLMSystemPrompt != "be brief" || cfg.LLMModel != "llama3.1" || cfg.notify != bot.NotifyDM {
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
		{map[string]string{"TELEGRAM_BOT_TOKEN": "t", "APPROVAL_NOTIFY": "group"}, `APPROVAL_NOTIFY: "group" is not one of chat, dm`},
		{map[string]string{"TELEGRAM_BOT_TOKEN": "t", "WEBFETCH_ALLOW_PRIVATE": "yes please"}, `WEBFETCH_ALLOW_PRIVATE: "yes please" is not a valid boolean`},
		{map[string]string{"TELEGRAM_BOT_TOKEN": "t", "SHUTDOWN_TIMEOUT": "soon"}, `SHUTDOWN_TIMEOUT: "soon" is not a valid duration`},
		{map[string]string{"TELEGRAM_BOT_TOKEN": "t", "SHUTDOWN_TIMEOUT": "0s"}, "SHUTDOWN_TIMEOUT must be positive"},
		{map[string]string{"TELEGRAM_BOT_TOKEN": "t", "LLM_TIMEOUT": "-1s"}, "LLM_TIMEOUT must not be negative"},
		{map[string]string{"TELEGRAM_BOT_TOKEN": "t", "LLM_TIMEOUT": "2"}, `LLM_TIMEOUT: "2" is not a valid duration`},
		{map[string]string{"TELEGRAM_BOT_TOKEN": "t", "WEBHOOK_URL": "https://x/h"}, "WEBHOOK_SECRET is required"},
		{map[string]string{"TELEGRAM_BOT_TOKEN": "t", "WEBHOOK_URL": "https://x/h", "WEBHOOK_SECRET": "s"}, "LISTEN_ADDR is required"},
		{map[string]string{"TELEGRAM_BOT_TOKEN": "t", "WEBHOOK_URL": "bot.example.com/h", "WEBHOOK_SECRET": "s", "LISTEN_ADDR": ":1"}, "WEBHOOK_URL"},
		{map[string]string{"TELEGRAM_BOT_TOKEN": "t", "WEBHOOK_URL": "https://x/h", "WEBHOOK_SECRET": "bad secret!", "LISTEN_ADDR": ":1"}, "WEBHOOK_SECRET must be"},
		{map[string]string{"TELEGRAM_BOT_TOKEN": "t", "FILES_ROOTS": "docs:/nonexistent-tollgate-dir:rw"}, "FILES_ROOTS: "},
		{map[string]string{"TELEGRAM_BOT_TOKEN": "t", "FILES_ROOTS": "docs:/tmp:maybe"}, "FILES_ROOTS: "},
		{map[string]string{"TELEGRAM_BOT_TOKEN": "t", "SHELL_ENABLED": "yes"}, `SHELL_ENABLED: "yes" is not a valid boolean`},
		{map[string]string{"TELEGRAM_BOT_TOKEN": "t", "MCP_SERVERS": "/nonexistent/mcp.json"}, "MCP_SERVERS: "},
		{map[string]string{"TELEGRAM_BOT_TOKEN": "t", "MCP_TIMEOUT": "-5s"}, "MCP_TIMEOUT: -5s must not be negative"},
		{map[string]string{"TELEGRAM_BOT_TOKEN": "t", "SHELL_ENABLED": "true"}, "SHELL_DIR is required when SHELL_ENABLED=true"},
		{map[string]string{"TELEGRAM_BOT_TOKEN": "t", "SHELL_TIMEOUT": "-1s"}, "SHELL_TIMEOUT: -1s must not be negative"},
		{map[string]string{"TELEGRAM_BOT_TOKEN": "t", "SHELL_TIMEOUT": "1 minute"}, `SHELL_TIMEOUT: "1 minute" is not a valid duration`},
		{map[string]string{"TELEGRAM_BOT_TOKEN": "t", "SHELL_ENV": "PATH,MY-VAR"}, `SHELL_ENV: "MY-VAR" is not a variable name`},
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

// TestDocsMatchConfig keeps README's configuration table and .env.example
// true: every variable is documented, and each default shown is the one
// that applies, whether cmd/bot or a constructor owns it.
func TestDocsMatchConfig(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile("../../.env.example")
	if err != nil {
		t.Fatal(err)
	}
	// The default cell of each variable in the table.
	table := map[string]string{}
	for _, line := range strings.Split(string(readme), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 4 {
			continue
		}
		for _, name := range strings.Split(cells[1], ",") {
			name = strings.Trim(strings.TrimSpace(name), "`")
			table[name] = strings.TrimSpace(cells[2])
		}
	}
	params, err := env.GetFieldParams(&config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range params {
		cell, ok := table[p.Key]
		if !ok {
			t.Errorf("README's configuration table has no row for %s", p.Key)
		}
		if !strings.Contains(string(example), "\n"+p.Key+"=") {
			t.Errorf(".env.example has no %s= line", p.Key)
		}
		if p.HasDefaultValue && cell != "`"+p.DefaultValue+"`" {
			t.Errorf("README shows %s's default as %s; it is %q", p.Key, cell, p.DefaultValue)
		}
	}
	if d, err := time.ParseDuration(strings.Trim(table["LLM_TIMEOUT"], "`")); err != nil || d != llm.DefaultTimeout {
		t.Errorf("README shows LLM_TIMEOUT's default as %s; llm.DefaultTimeout is %v", table["LLM_TIMEOUT"], llm.DefaultTimeout)
	}
	if table["LLM_BASE_URL"] != "`"+llm.DefaultBaseURL+"`" {
		t.Errorf("README shows LLM_BASE_URL's default as %s; llm.DefaultBaseURL is %s", table["LLM_BASE_URL"], llm.DefaultBaseURL)
	}
}

func TestApprovalNotify(t *testing.T) {
	for _, tc := range []struct {
		value string
		want  bot.Notify
		err   string
	}{
		{"", bot.NotifyChat, ""}, // unset: in the chat, as bot.New defaults
		{"chat", bot.NotifyChat, ""},
		{"dm", bot.NotifyDM, ""},
		{"DM", "", `APPROVAL_NOTIFY: "DM" is not one of chat, dm`},
		{"email", "", `APPROVAL_NOTIFY: "email" is not one of chat, dm`},
	} {
		cfg, err := loadConfig(envOf(map[string]string{"TELEGRAM_BOT_TOKEN": "t", "APPROVAL_NOTIFY": tc.value}))
		switch {
		case tc.err == "" && (err != nil || cfg.notify != tc.want):
			t.Errorf("APPROVAL_NOTIFY=%q: %q, %v; want %q", tc.value, cfg.notify, err, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("APPROVAL_NOTIFY=%q: %v; want an error with %q", tc.value, err, tc.err)
		}
	}
}
