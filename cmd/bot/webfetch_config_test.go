package main

import (
	"slices"
	"strings"
	"testing"
)

// TestWebfetchPortsAndConcurrency: good values pass through; a bad one
// stops the bot with an error naming the variable.
func TestWebfetchPortsAndConcurrency(t *testing.T) {
	cfg, err := loadConfig(envOf(map[string]string{"TELEGRAM_BOT_TOKEN": "t", "WEBFETCH_PORTS": "8080,8443", "WEBFETCH_MAX_CONCURRENT": "2"}))
	if err != nil || !slices.Equal(cfg.WebfetchPorts, []int{8080, 8443}) || cfg.WebfetchMaxConcurrent != 2 {
		t.Fatalf("got %v, %d, %v", cfg.WebfetchPorts, cfg.WebfetchMaxConcurrent, err)
	}
	for env, want := range map[string]string{
		"0":       "WEBFETCH_PORTS: 0 is not a port",
		"65536":   "WEBFETCH_PORTS: 65536 is not a port",
		"80,http": `WEBFETCH_PORTS: "80,http" is not a valid comma-separated list of whole numbers`,
	} {
		_, err := loadConfig(envOf(map[string]string{"TELEGRAM_BOT_TOKEN": "t", "WEBFETCH_PORTS": env}))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("WEBFETCH_PORTS=%q: err = %v, want %q", env, err, want)
		}
	}
	_, err = loadConfig(envOf(map[string]string{"TELEGRAM_BOT_TOKEN": "t", "WEBFETCH_MAX_CONCURRENT": "-1"}))
	if err == nil || !strings.Contains(err.Error(), "WEBFETCH_MAX_CONCURRENT") {
		t.Errorf("WEBFETCH_MAX_CONCURRENT=-1: err = %v", err)
	}
}
