package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"

	"tollgate/bot"
	"tollgate/llm"
	"tollgate/prompt"
	"tollgate/tools/files"
	"tollgate/tools/mcp"
)

// defaultSystemPrompt tells the agent how approvals work, so it explains
// a pause instead of retrying blindly.
const defaultSystemPrompt = `You are Tollgate, a helpful assistant that chats with the user in Telegram.
You can read web pages with the web-fetch tools. Some tool calls need the user's approval
before they run: when a call is rejected, do not retry it; say what you would have done
and ask how to go on. Answer concisely; plain text or simple Markdown.`

// config is the whole configuration, read once from the environment.
// The variable names are a contract with users' deployments: never rename.
//
// A setting that a constructor also defaults (the Telegram API URL, the
// model's base URL and timeout) has no envDefault here: unset, it is passed
// on as the zero value and the constructor's default applies, so each
// default lives in one place. An envDefault stays only where the
// constructor has none (llm and store require the model name and database
// path; prompt takes an empty system prompt to mean none) or nothing but
// this package uses the value.
type config struct {
	TelegramToken        string        `env:"TELEGRAM_BOT_TOKEN"`
	TelegramAPIURL       string        `env:"TELEGRAM_API_URL"`
	TelegramAllowedUsers string        `env:"TELEGRAM_ALLOWED_USERS"`
	LLMBaseURL           string        `env:"LLM_BASE_URL"`
	LLMAPIKey            string        `env:"LLM_API_KEY"`
	LLMModel             string        `env:"LLM_MODEL" envDefault:"gpt-4.1-mini"`
	LLMSystemPrompt      string        `env:"LLM_SYSTEM_PROMPT"`
	LLMTimeout           time.Duration `env:"LLM_TIMEOUT"`
	// AgentWorkers is how many prompts the agent advances at once (model
	// requests and tools running at the same time); 0 leaves it to
	// prompt.Config's default.
	AgentWorkers int `env:"AGENT_WORKERS"`
	// ApprovalTimeout and ApprovalRemind: empty means a request waits
	// forever, and is never shown again on its own.
	ApprovalTimeout time.Duration `env:"APPROVAL_TIMEOUT"`
	ApprovalRemind  time.Duration `env:"APPROVAL_REMIND"`
	// ApprovalMode: interactive (empty), auto-approve or auto-deny.
	ApprovalMode string `env:"APPROVAL_MODE"`
	// ApprovalDenyTools: tools never offered to the model.
	ApprovalDenyTools []string `env:"APPROVAL_DENY_TOOLS" envSeparator:","`
	// TelegramApprovers: who may decide (empty: the allowed users).
	// ApprovalQuorum: how many different approvers must approve (unset:
	// the prompt service's default, 1). ApprovalSelf false: the person
	// who started a prompt may not approve its requests while another
	// approver exists.
	TelegramApprovers string `env:"TELEGRAM_APPROVERS"`
	ApprovalQuorum    int    `env:"APPROVAL_QUORUM"`
	ApprovalSelf      bool   `env:"APPROVAL_SELF" envDefault:"true"`
	// ApprovalRules: the operator's rules file; empty: none.
	ApprovalRules string `env:"APPROVAL_RULES"`
	// ApprovalNotify: where a group's requests are shown, chat (empty) or
	// dm; bot.New owns the default.
	ApprovalNotify string `env:"APPROVAL_NOTIFY"`
	DatabasePath   string `env:"DATABASE_PATH" envDefault:"data/tollgate.db"`
	// DatabaseURL, when set (postgres://…), keeps the state in PostgreSQL
	// instead of the SQLite file at DatabasePath.
	DatabaseURL          string   `env:"DATABASE_URL"`
	WebfetchDomains      []string `env:"WEBFETCH_ALLOWED_DOMAINS" envSeparator:","`
	WebfetchAllowPrivate bool     `env:"WEBFETCH_ALLOW_PRIVATE"`
	// WebfetchPorts opens ports besides 80 and 443; WebfetchMaxConcurrent
	// bounds fetches at once (0: webfetch's default).
	WebfetchPorts         []int `env:"WEBFETCH_PORTS" envSeparator:","`
	WebfetchMaxConcurrent int   `env:"WEBFETCH_MAX_CONCURRENT"`
	// FilesRoots names the folders the file tools may use:
	// "name:path:ro|rw,..."; empty: no file tools.
	FilesRoots string `env:"FILES_ROOTS"`
	// ShellEnabled turns shell.run on; it then runs in ShellDir, for at
	// most ShellTimeout (0: the shell package's default), with only the
	// variables ShellEnv names (empty: its default).
	// MCPServers is an mcpServers JSON file; MCPTimeout bounds one call
	// of their tools (0: the mcp package's default).
	MCPServers    string        `env:"MCP_SERVERS"`
	MCPTimeout    time.Duration `env:"MCP_TIMEOUT"`
	ShellEnabled  bool          `env:"SHELL_ENABLED"`
	ShellDir      string        `env:"SHELL_DIR"`
	ShellTimeout  time.Duration `env:"SHELL_TIMEOUT"`
	ShellEnv      []string      `env:"SHELL_ENV" envSeparator:","`
	LogLevel      string        `env:"LOG_LEVEL" envDefault:"info"`
	WebhookURL    string        `env:"WEBHOOK_URL"`
	WebhookSecret string        `env:"WEBHOOK_SECRET"`
	ListenAddr    string        `env:"LISTEN_ADDR"`
	// ReplicaName names this process among replicas that share
	// PostgreSQL (default: the host name and a random suffix).
	ReplicaName string `env:"REPLICA_NAME"`
	// ReplicaLeaseTTL is how long a replica's leases last unless renewed
	// (0: the prompt service's and the bot's defaults, 30s and 15s).
	ReplicaLeaseTTL time.Duration `env:"REPLICA_LEASE_TTL"`
	ShutdownTimeout time.Duration `env:"SHUTDOWN_TIMEOUT" envDefault:"30s"`

	allowedUsers []int64
	logLevel     slog.Level
	mode         prompt.Mode
	roots        []files.Root
	mcp          mcp.Config
	approvers    []int64
	notify       bot.Notify
}

// loadConfig reads the environment through getenv and checks every value,
// naming the variable in each error so a user knows what to fix.
func loadConfig(getenv func(string) string) (config, error) {
	var cfg config
	params, err := env.GetFieldParams(&cfg)
	if err != nil {
		return cfg, fmt.Errorf("config: %w", err)
	}
	vars := map[string]string{}
	for _, p := range params {
		if v := getenv(p.Key); v != "" {
			vars[p.Key] = v
		}
	}
	if err := env.ParseWithOptions(&cfg, env.Options{Environment: vars}); err != nil {
		return cfg, explainEnvError(err, vars)
	}
	var errs []error
	if strings.TrimSpace(cfg.TelegramToken) == "" {
		errs = append(errs, errors.New("TELEGRAM_BOT_TOKEN is required: create a bot with @BotFather, then cp .env.example .env and set it there"))
	}
	// Unset URLs are left to bot.New and llm.New; a set one is checked
	// here so its error names the variable.
	if cfg.TelegramAPIURL != "" {
		if err := checkURL(cfg.TelegramAPIURL); err != nil {
			errs = append(errs, fmt.Errorf("TELEGRAM_API_URL: %w", err))
		}
	}
	if cfg.LLMBaseURL != "" {
		if err := checkURL(cfg.LLMBaseURL); err != nil {
			errs = append(errs, fmt.Errorf("LLM_BASE_URL: %w", err))
		}
	}
	if strings.TrimSpace(cfg.LLMModel) == "" {
		errs = append(errs, errors.New("LLM_MODEL must not be empty"))
	}
	if cfg.LLMSystemPrompt == "" {
		cfg.LLMSystemPrompt = defaultSystemPrompt
	}
	users, err := parseUsers(cfg.TelegramAllowedUsers)
	if err != nil {
		errs = append(errs, fmt.Errorf("TELEGRAM_ALLOWED_USERS: %w", err))
	}
	cfg.allowedUsers = users
	if cfg.approvers, err = parseUsers(cfg.TelegramApprovers); err != nil {
		errs = append(errs, fmt.Errorf("TELEGRAM_APPROVERS: %w", err))
	}
	// Unset is 0, left to the prompt service's default; set, it must
	// be one a bot with these approvers can meet.
	switch n := len(cfg.deciders()); {
	case vars["APPROVAL_QUORUM"] != "" && cfg.ApprovalQuorum < 1:
		errs = append(errs, fmt.Errorf("APPROVAL_QUORUM: %d must be at least 1", cfg.ApprovalQuorum))
	case cfg.ApprovalQuorum > 1 && cfg.ApprovalQuorum > n:
		errs = append(errs, fmt.Errorf("APPROVAL_QUORUM: %d approvals can never be given by %d approvers (TELEGRAM_APPROVERS, else TELEGRAM_ALLOWED_USERS)",
			cfg.ApprovalQuorum, n))
	}
	if err := cfg.logLevel.UnmarshalText([]byte(cfg.LogLevel)); err != nil {
		errs = append(errs, fmt.Errorf("LOG_LEVEL: %q is not one of debug, info, warn, error", cfg.LogLevel))
	}
	if strings.TrimSpace(cfg.DatabasePath) == "" {
		errs = append(errs, errors.New("DATABASE_PATH must not be empty"))
	}
	if cfg.WebhookURL != "" {
		// Telegram itself refuses a non-https webhook, with its own message;
		// a local Bot API server or a test may accept http.
		if err := checkURL(cfg.WebhookURL); err != nil {
			errs = append(errs, fmt.Errorf("WEBHOOK_URL: %w", err))
		}
		if cfg.WebhookSecret == "" {
			errs = append(errs, errors.New("WEBHOOK_SECRET is required when WEBHOOK_URL is set"))
		} else if !validSecret(cfg.WebhookSecret) {
			errs = append(errs, errors.New("WEBHOOK_SECRET must be 1-256 characters of A-Z, a-z, 0-9, _ and - (Telegram's rule)"))
		}
		if cfg.ListenAddr == "" {
			errs = append(errs, errors.New("LISTEN_ADDR is required when WEBHOOK_URL is set (for example :8080)"))
		}
	}
	if cfg.ShutdownTimeout <= 0 {
		errs = append(errs, errors.New("SHUTDOWN_TIMEOUT must be positive"))
	}
	// 0 is unset: llm.New applies its default.
	if cfg.LLMTimeout < 0 {
		errs = append(errs, errors.New("LLM_TIMEOUT must not be negative"))
	}
	// 0 is unset: the prompt service applies its default.
	if cfg.ApprovalTimeout < 0 {
		errs = append(errs, fmt.Errorf("APPROVAL_TIMEOUT: %v must not be negative (leave it empty to wait forever)", cfg.ApprovalTimeout))
	}
	if cfg.ApprovalRemind < 0 {
		errs = append(errs, fmt.Errorf("APPROVAL_REMIND: %v must not be negative (leave it empty for no reminder)", cfg.ApprovalRemind))
	}
	if cfg.roots, err = files.ParseRoots(cfg.FilesRoots); err != nil {
		errs = append(errs, fmt.Errorf("FILES_ROOTS: %w", err))
	}
	if cfg.MCPServers != "" {
		if cfg.mcp, err = mcp.ParseConfig(cfg.MCPServers); err != nil {
			errs = append(errs, fmt.Errorf("MCP_SERVERS: %w", err))
		}
	}
	if cfg.ReplicaLeaseTTL < 0 {
		errs = append(errs, fmt.Errorf("REPLICA_LEASE_TTL: %v must not be negative (leave it empty for the defaults)", cfg.ReplicaLeaseTTL))
	}
	if cfg.MCPTimeout < 0 {
		errs = append(errs, fmt.Errorf("MCP_TIMEOUT: %v must not be negative (leave it empty for 60s)", cfg.MCPTimeout))
	}
	if cfg.ShellEnabled && strings.TrimSpace(cfg.ShellDir) == "" {
		errs = append(errs, errors.New("SHELL_DIR is required when SHELL_ENABLED=true: the folder commands run in"))
	}
	if cfg.ShellTimeout < 0 {
		errs = append(errs, fmt.Errorf("SHELL_TIMEOUT: %v must not be negative (leave it empty for 60s)", cfg.ShellTimeout))
	}
	for _, name := range cfg.ShellEnv {
		if !envName.MatchString(strings.TrimSpace(name)) {
			errs = append(errs, fmt.Errorf("SHELL_ENV: %q is not a variable name", name))
		}
	}
	if cfg.mode, err = prompt.ParseMode(cfg.ApprovalMode); err != nil {
		errs = append(errs, fmt.Errorf("APPROVAL_MODE: %w", err))
	}
	if cfg.notify, err = bot.ParseNotify(cfg.ApprovalNotify); err != nil {
		errs = append(errs, fmt.Errorf("APPROVAL_NOTIFY: %w", err))
	}
	if cfg.AgentWorkers < 0 {
		errs = append(errs, fmt.Errorf("AGENT_WORKERS: %d must not be negative (leave it unset for the default)", cfg.AgentWorkers))
	}
	for _, p := range cfg.WebfetchPorts {
		if p < 1 || p > 65535 {
			errs = append(errs, fmt.Errorf("WEBFETCH_PORTS: %d is not a port (1-65535)", p))
		}
	}
	if cfg.WebfetchMaxConcurrent < 0 {
		errs = append(errs, fmt.Errorf("WEBFETCH_MAX_CONCURRENT: %d must not be negative (leave it unset for the default)", cfg.WebfetchMaxConcurrent))
	}
	return cfg, errors.Join(errs...)
}

// deciders is who may decide: TELEGRAM_APPROVERS, else the allowed users.
func (c config) deciders() []int64 {
	if len(c.approvers) > 0 {
		return c.approvers
	}
	return c.allowedUsers
}

// explainEnvError rewrites the env library's errors, which name Go struct
// fields, to name the variable and its value instead.
func explainEnvError(err error, vars map[string]string) error {
	var agg env.AggregateError
	if !errors.As(err, &agg) {
		return fmt.Errorf("config: %w", err)
	}
	var errs []error
	for _, e := range agg.Errors {
		var pe env.ParseError
		if !errors.As(e, &pe) {
			errs = append(errs, e)
			continue
		}
		key := pe.Name
		if f, ok := reflect.TypeFor[config]().FieldByName(pe.Name); ok {
			key, _, _ = strings.Cut(f.Tag.Get("env"), ",")
		}
		errs = append(errs, fmt.Errorf("%s: %q is not a valid %s", key, vars[key], kindOf(pe.Type.String())))
	}
	return errors.Join(errs...)
}

func kindOf(goType string) string {
	switch goType {
	case "bool":
		return "boolean (true or false)"
	case "time.Duration":
		return "duration (for example 30s or 2m)"
	case "int":
		return "whole number"
	case "[]int":
		return "comma-separated list of whole numbers"
	default:
		return goType
	}
}

// envName is what SHELL_ENV may list: environment variable names.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func checkURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("%q is not a URL: %w", raw, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q must be an http or https URL", raw)
	}
	return nil
}

func parseUsers(s string) ([]int64, error) {
	var ids []int64
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		id, err := strconv.ParseInt(f, 10, 64)
		if err != nil || id <= 0 {
			return nil, fmt.Errorf("%q is not a numeric Telegram user ID (write the numbers the bot shows a stranger, comma-separated)", f)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

func validSecret(s string) bool {
	if len(s) > 256 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// summary is one log line's worth of configuration, secrets masked.
func (c config) summary() []any {
	mode := "polling"
	if c.WebhookURL != "" {
		mode = "webhook"
	}
	return []any{
		"telegram_api_url", orDefault(c.TelegramAPIURL),
		"telegram_bot_token", mask(c.TelegramToken),
		"allowed_users", c.allowedUsers,
		"approvers", c.deciders(),
		"approval_quorum", orDefault(c.ApprovalQuorum),
		"approval_self", c.ApprovalSelf,
		"llm_base_url", c.llmBaseURL(),
		"llm_api_key", mask(c.LLMAPIKey),
		"llm_model", c.LLMModel,
		"agent_workers", orDefault(c.AgentWorkers),
		"approval_mode", c.mode,
		"approval_deny_tools", c.ApprovalDenyTools,
		"approval_rules", c.ApprovalRules,
		"files_roots", c.FilesRoots,
		"mcp_servers", c.MCPServers,
		"mcp_timeout", orDefault(c.MCPTimeout),
		"shell_enabled", c.ShellEnabled,
		"shell_dir", c.ShellDir,
		"shell_timeout", orDefault(c.ShellTimeout),
		"shell_env", c.ShellEnv,
		"approval_notify", c.notify,
		"database_path", c.DatabasePath,
		"database_url", redactURL(c.DatabaseURL),
		"webfetch_allowed_domains", c.WebfetchDomains,
		"webfetch_allow_private", c.WebfetchAllowPrivate,
		"webfetch_ports", c.WebfetchPorts,
		"webfetch_max_concurrent", orDefault(c.WebfetchMaxConcurrent),
		"mode", mode,
		"webhook_url", c.WebhookURL,
		"webhook_secret", mask(c.WebhookSecret),
		"listen_addr", c.ListenAddr,
		"log_level", c.logLevel.String(),
	}
}

// llmBaseURL is the endpoint llm.New will use: LLM_BASE_URL, or llm's
// default when it is unset.
func (c config) llmBaseURL() string {
	if c.LLMBaseURL == "" {
		return llm.DefaultBaseURL
	}
	return c.LLMBaseURL
}

// orDefault shows an unset setting whose default a constructor owns and
// does not export, rather than printing a zero value or a copy of the
// default that could go stale.
func orDefault[T comparable](v T) any {
	var zero T
	if v == zero {
		return "(default)"
	}
	return v
}

// mask shows whether a secret is set without showing it.
func mask(s string) string {
	if s == "" {
		return "(unset)"
	}
	return "***"
}
