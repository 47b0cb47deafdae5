package main

import (
	"slices"
	"strings"
	"testing"
)

// TestApproverSettings: TELEGRAM_APPROVERS, APPROVAL_QUORUM and
// APPROVAL_SELF each stop the start with a bad value, naming the
// variable; good values are passed on, and unset ones leave the defaults
// to their owners.
func TestApproverSettings(t *testing.T) {
	for _, tc := range []struct {
		name      string
		env       map[string]string
		err       string
		approvers []int64
		quorum    int
		self      bool
	}{
		{name: "defaults", env: map[string]string{}, self: true},
		{name: "approvers", env: map[string]string{"TELEGRAM_APPROVERS": "111, 222"}, approvers: []int64{111, 222}, self: true},
		{name: "approvers not numbers", env: map[string]string{"TELEGRAM_APPROVERS": "111,@bob"},
			err: `TELEGRAM_APPROVERS: "@bob" is not a numeric Telegram user ID`},
		{name: "approvers negative", env: map[string]string{"TELEGRAM_APPROVERS": "-5"},
			err: `TELEGRAM_APPROVERS: "-5" is not a numeric Telegram user ID`},
		{name: "quorum of the allowed users", env: map[string]string{"APPROVAL_QUORUM": "2"}, quorum: 2, self: true},
		{name: "quorum of the approvers", env: map[string]string{"TELEGRAM_APPROVERS": "1,2,3", "APPROVAL_QUORUM": "3"},
			approvers: []int64{1, 2, 3}, quorum: 3, self: true},
		{name: "quorum zero", env: map[string]string{"APPROVAL_QUORUM": "0"}, err: "APPROVAL_QUORUM: 0 must be at least 1"},
		{name: "quorum negative", env: map[string]string{"APPROVAL_QUORUM": "-1"}, err: "APPROVAL_QUORUM: -1 must be at least 1"},
		{name: "quorum not a number", env: map[string]string{"APPROVAL_QUORUM": "two"},
			err: `APPROVAL_QUORUM: "two" is not a valid whole number`},
		{name: "quorum impossible", env: map[string]string{"TELEGRAM_APPROVERS": "1,2", "APPROVAL_QUORUM": "3"},
			err: "APPROVAL_QUORUM: 3 approvals can never be given by 2 approvers"},
		{name: "quorum above the allowed users", env: map[string]string{"APPROVAL_QUORUM": "3"},
			err: "APPROVAL_QUORUM: 3 approvals can never be given by 2 approvers"},
		{name: "self false", env: map[string]string{"APPROVAL_SELF": "false"}},
		{name: "self not a boolean", env: map[string]string{"APPROVAL_SELF": "never"},
			err: `APPROVAL_SELF: "never" is not a valid boolean (true or false)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{"TELEGRAM_BOT_TOKEN": "t", "TELEGRAM_ALLOWED_USERS": "111,222"}
			for k, v := range tc.env {
				env[k] = v
			}
			cfg, err := loadConfig(envOf(env))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(cfg.approvers, tc.approvers) || cfg.ApprovalQuorum != tc.quorum || cfg.ApprovalSelf != tc.self {
				t.Fatalf("approvers %v, quorum %d, self %v; want %v, %d, %v",
					cfg.approvers, cfg.ApprovalQuorum, cfg.ApprovalSelf, tc.approvers, tc.quorum, tc.self)
			}
		})
	}
}
