package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/caarlos0/env/v11"

	"tollgate/store"
)

// runCheck is "bot check [--env-file FILE]": it runs SQLite's full
// integrity check on DATABASE_PATH and prints "ok" or each problem found.
// It reads DATABASE_PATH as the bot does, and nothing else, so it works
// without a Telegram token. The check takes the bot's lock: it refuses
// while a bot has the file open.
func runCheck(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	const usage = "usage: bot check [--env-file FILE]"
	switch {
	case len(args) == 0:
	case len(args) == 2 && (args[0] == "--env-file" || args[0] == "-env-file"):
		fileEnv, err := readEnvFile(args[1])
		if err != nil {
			return err
		}
		getenv = withFallback(getenv, fileEnv)
	default:
		return fmt.Errorf("bad arguments %q (%s)", args, usage)
	}
	path, err := databasePath(getenv)
	if err != nil {
		return err
	}
	problems, err := store.Check(ctx, path)
	if errors.Is(err, store.ErrInUse) {
		return fmt.Errorf("check database (DATABASE_PATH=%s): %w: stop the bot first, then run bot check again", path, err)
	}
	if err != nil {
		return fmt.Errorf("check database (DATABASE_PATH=%s): %w", path, err)
	}
	if len(problems) == 0 {
		fmt.Fprintln(stdout, "ok")
		return nil
	}
	for _, p := range problems {
		fmt.Fprintln(stdout, p)
	}
	return fmt.Errorf("database %s is damaged: integrity_check found the problems above: restore it from a backup", path)
}

// databasePath is DATABASE_PATH as loadConfig reads it, default included,
// taken from config's own tag so the two cannot drift apart.
func databasePath(getenv func(string) string) (string, error) {
	if getenv("DATABASE_URL") != "" {
		return "", errors.New("DATABASE_URL is set: bot check and bot audit read a SQLite database (DATABASE_PATH) only, so far")
	}
	params, err := env.GetFieldParams(&config{})
	if err != nil {
		return "", fmt.Errorf("config: %w", err)
	}
	for _, p := range params {
		if p.Key != "DATABASE_PATH" {
			continue
		}
		if v := getenv(p.Key); v != "" {
			return v, nil
		}
		return p.DefaultValue, nil
	}
	return "", errors.New("config: DATABASE_PATH is not a setting")
}
