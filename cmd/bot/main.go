// Command bot runs Tollgate: a Telegram bot that runs an LLM agent and asks
// a human before any risky tool call runs.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/joho/godotenv"

	"tollgate/bot"
	"tollgate/llm"
	"tollgate/prompt"
	"tollgate/tools/files"
	"tollgate/tools/mcp"
	"tollgate/tools/shell"
	"tollgate/tools/webfetch"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = ""

func main() {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigs
		cancel()
		<-sigs
		fmt.Fprintln(os.Stderr, "tollgate: second signal, exiting at once")
		os.Exit(130)
	}()
	err := run(ctx, os.Args, os.Getenv, os.Stdout, os.Stderr)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "tollgate:", err)
		os.Exit(1)
	}
}

func buildVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

// run is the whole program; main only adds signals and the exit code.
// It returns when ctx ends (after a graceful shutdown) or on a start-up
// error, which names what to fix.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	const usage = "usage: bot [--env-file FILE] | bot check [--env-file FILE] | " +
		"bot audit [--env-file FILE] [--json] [--since DURATION] [--limit N] | " +
		"bot rules check FILE | bot rules explain FILE TOOL JSON | bot version"
	if len(args) > 1 {
		switch args[1] {
		case "check":
			return runCheck(ctx, args[2:], getenv, stdout)
		case "rules":
			return runRules(ctx, args[2:], stdout)
		case "audit":
			return runAudit(ctx, args[2:], getenv, stdout, time.Now)
		case "version", "--version", "-version":
			fmt.Fprintln(stdout, "tollgate", buildVersion())
			return nil
		case "help", "--help", "-h":
			fmt.Fprintln(stdout, usage+"\n\nConfiguration comes from the environment, and from FILE for variables\nthe environment does not set; see .env.example and README.md.")
			return nil
		case "--env-file", "-env-file":
			if len(args) != 3 {
				return fmt.Errorf("--env-file needs a file name (%s)", usage)
			}
			fileEnv, err := readEnvFile(args[2])
			if err != nil {
				return err
			}
			getenv = withFallback(getenv, fileEnv)
		default:
			return fmt.Errorf("unknown argument %q (%s)", args[1], usage)
		}
	}

	cfg, err := loadConfig(getenv)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: cfg.logLevel}))
	log.Info("starting tollgate", append([]any{"version", buildVersion()}, cfg.summary()...)...)
	if cfg.LLMAPIKey == "" && strings.Contains(cfg.llmBaseURL(), "api.openai.com") {
		log.Warn("LLM_API_KEY is empty but LLM_BASE_URL is OpenAI's: every request will be refused; set LLM_API_KEY, or point LLM_BASE_URL at a local server")
	}
	if len(cfg.allowedUsers) == 0 {
		log.Warn("TELEGRAM_ALLOWED_USERS is empty: nobody may chat or decide; the bot tells each stranger their numeric ID")
	}
	if !cfg.ApprovalSelf && len(cfg.deciders()) <= 1 {
		log.Warn("APPROVAL_SELF=false has no effect with a single approver: they may still decide the requests they start")
	}

	db, err := openDatabase(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer func() {
		if err := db.Close(); err != nil {
			log.Error("close database", "err", err)
		}
	}()

	fetcher, err := webfetch.New(ctx, webfetch.Config{
		Store:         db,
		Seed:          cfg.WebfetchDomains,
		AllowPrivate:  cfg.WebfetchAllowPrivate,
		Ports:         cfg.WebfetchPorts,
		MaxConcurrent: cfg.WebfetchMaxConcurrent,
		UserAgent:     "Tollgate/" + buildVersion() + " (Telegram bot; web-fetch tool)",
		Logger:        log,
	})
	if err != nil {
		return fmt.Errorf("web-fetch (WEBFETCH_ALLOWED_DOMAINS): %w", err)
	}

	model, err := llm.New(llm.Config{
		BaseURL: cfg.LLMBaseURL,
		APIKey:  cfg.LLMAPIKey,
		Model:   cfg.LLMModel,
		Timeout: cfg.LLMTimeout,
		Logger:  log,
	})
	if err != nil {
		return fmt.Errorf("model (LLM_BASE_URL, LLM_MODEL): %w", err)
	}

	tools := fetcher.Tools()
	if len(cfg.roots) > 0 {
		fs, err := files.New(ctx, files.Config{Roots: cfg.roots, Logger: log})
		if err != nil {
			return fmt.Errorf("file tools (FILES_ROOTS): %w", err)
		}
		defer fs.Close()
		tools = append(tools, fs.Tools()...)
	}
	if cfg.ShellEnabled {
		sh, err := shell.New(shell.Config{Dir: cfg.ShellDir, Timeout: cfg.ShellTimeout, Env: trimAll(cfg.ShellEnv), Logger: log})
		if err != nil {
			return fmt.Errorf("shell tool (SHELL_DIR, SHELL_TIMEOUT, SHELL_ENV): %w", err)
		}
		tools = append(tools, sh.Tools()...)
	}
	var families []string
	for _, srv := range cfg.mcp.Servers {
		families = append(families, mcp.ToolName(srv.Name, ""))
	}
	tools, checker, denied, err := operatorPolicy(cfg, tools, families...)
	if err != nil {
		return err
	}
	var sources []prompt.ToolSource
	var helpNotes func() []string
	if len(cfg.mcp.Servers) > 0 {
		// New waits for each server's first start, failed or not: a server
		// that cannot start leaves its tools out and is retried.
		mctx, cancel := context.WithTimeout(ctx, 2*mcp.DefaultTimeout)
		servers, err := mcp.New(mctx, cfg.mcp, mcp.Options{Timeout: cfg.MCPTimeout, Logger: log})
		cancel()
		if err != nil {
			return fmt.Errorf("MCP servers (MCP_SERVERS=%s): %w", cfg.MCPServers, err)
		}
		defer func() {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			if err := servers.Close(cctx); err != nil {
				log.Warn("close MCP servers", "err", err)
			}
		}()
		sources = append(sources, deniedSource{ToolSource: servers, denied: denied})
		helpNotes = func() []string { return mcpNotes(servers.Status()) }
	}
	if cfg.mode == prompt.ModeAutoApprove {
		log.Warn("APPROVAL_MODE=auto-approve: EVERY CALL THAT WOULD ASK RUNS WITHOUT ASKING ANYONE. Use it for development only; deny rules still apply.")
	}
	replica := replicaName(cfg.ReplicaName, os.Hostname)
	svc, err := prompt.NewService(prompt.Config{
		Model:   model,
		Store:   db,
		Tools:   tools,
		Sources: sources,
		Policy:  checker,
		Mode:    cfg.mode,
		System:  cfg.LLMSystemPrompt,
		Workers: cfg.AgentWorkers,
		// Empty waits forever and reminds never, as before these existed.
		ApprovalTimeout: cfg.ApprovalTimeout,
		ApprovalRemind:  cfg.ApprovalRemind,
		Quorum:          cfg.ApprovalQuorum,
		// Replicas on PostgreSQL take turns on each prompt; a SQLite
		// file is opened by one process only, which needs no leases.
		Leases:   leasesOf(db),
		Replica:  replica,
		LeaseTTL: cfg.ReplicaLeaseTTL,
		Logger:   log,
	})
	if err != nil {
		return fmt.Errorf("prompt service: %w", err)
	}
	// Caught here rather than as a refused request in the middle of a chat.
	for _, d := range svc.Tools() {
		if _, err := llm.WireName(d.Name); err != nil {
			return fmt.Errorf("tool %s cannot be offered to the model: %w", d.Name, err)
		}
	}

	tg, err := bot.New(bot.Config{
		Token:        cfg.TelegramToken,
		APIURL:       cfg.TelegramAPIURL,
		AllowedUsers: cfg.allowedUsers,
		Service:      svc,
		Store:        db,
		Logger:       log,
		Webhook:      bot.Webhook{URL: cfg.WebhookURL, Secret: cfg.WebhookSecret},
		// Who may decide is the bot's to check; the quorum is the core's.
		Approvers:      cfg.approvers,
		NoSelfApproval: !cfg.ApprovalSelf,
		HelpNotes:      helpNotes,
		Notify:         cfg.notify,
		// Replicas share PostgreSQL and take turns through its leases; a
		// SQLite file is opened by one process only, which needs none.
		Leases:   leasesOf(db),
		Replica:  replica,
		LeaseTTL: cfg.ReplicaLeaseTTL,
	})
	if err != nil {
		return fmt.Errorf("telegram: %w", err)
	}

	// Recovery is the bot's first act once Telegram answers (bot.Run): it
	// resumes the prompts left running and re-sends the requests left
	// waiting, in an order that sends each once.

	// Telegram keeps running through the service's shutdown, so answers of
	// model turns that finish in it still reach their chats; the bot stops
	// after the service. Its own context therefore outlives ctx.
	botCtx, stopBot := context.WithCancel(context.WithoutCancel(ctx))
	defer stopBot()
	served := make(chan error, 1)
	go func() { served <- serve(botCtx, cfg, tg, db, log) }()
	var runErr error
	select {
	case <-ctx.Done():
		log.Info("stopping: no new requests; running model turns and tools may finish", "deadline", cfg.ShutdownTimeout)
	case runErr = <-served:
		// Telegram failed (a refused token, say): shut down the rest.
		served <- runErr
	}

	// Prompts waiting for approval simply stay waiting.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownTimeout)
	defer cancel()
	if err := svc.Close(sctx); err != nil {
		log.Warn("shutdown deadline passed; unfinished calls are resumed or reported on the next start", "err", err)
	}
	stopBot()
	runErr = <-served
	log.Info("stopped")
	return runErr
}

// readEnvFile reads KEY=VALUE lines. Nothing is run by a shell, so spaces
// and quotes in a value are safe; $NAME refers to an earlier line of the
// file, and single quotes keep a value exactly as written.
func readEnvFile(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read env file: %w", err)
	}
	defer f.Close()
	vars, err := godotenv.Parse(f)
	if err != nil {
		return nil, fmt.Errorf("read env file %s: %w", path, err)
	}
	return vars, nil
}

// withFallback lets the real environment win over the file, so a value set
// for one run overrides .env.
func withFallback(getenv func(string) string, file map[string]string) func(string) string {
	return func(key string) string {
		if v := getenv(key); v != "" {
			return v
		}
		return file[key]
	}
}

// serve runs the Telegram side until ctx ends: long polling, or in webhook
// mode an HTTP server for Telegram's deliveries. With LISTEN_ADDR set the
// server also answers health checks (/healthz, /health), in either mode.
func serve(ctx context.Context, cfg config, tg *bot.Bot, db pinger, log *slog.Logger) error {
	if cfg.ListenAddr == "" {
		if err := tg.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
			return fmt.Errorf("telegram: %w", err)
		}
		return nil
	}
	ln, err := net.Listen("tcp", cfg.ListenAddr)
	if err != nil {
		return fmt.Errorf("listen on LISTEN_ADDR=%s: %w", cfg.ListenAddr, err)
	}
	mux := http.NewServeMux()
	health := healthHandler(db, tg, cfg.WebhookURL == "")
	// Both spellings are common in probes and load balancers.
	mux.Handle("GET /healthz", health)
	mux.Handle("GET /health", health)
	if cfg.WebhookURL != "" {
		mux.Handle("/", tg.WebhookHandler())
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	log.Info("webhook server listening", "addr", ln.Addr().String())

	var wg sync.WaitGroup
	wg.Add(1)
	srvErr := make(chan error, 1)
	go func() {
		defer wg.Done()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			srvErr <- err
		}
	}()
	runErr := tg.Run(ctx)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	wg.Wait()
	select {
	case err := <-srvErr:
		return fmt.Errorf("webhook server: %w", err)
	default:
	}
	if runErr != nil && !errors.Is(runErr, context.Canceled) {
		return fmt.Errorf("telegram: %w", runErr)
	}
	return nil
}

// trimAll trims each of a comma-separated list's items and drops empty
// ones; nil stays nil, so a constructor's default applies.
func trimAll(items []string) []string {
	var out []string
	for _, it := range items {
		if it = strings.TrimSpace(it); it != "" {
			out = append(out, it)
		}
	}
	return out
}
