package store_test

import (
	"tollgate/bot"
	"tollgate/prompt"
	"tollgate/store"
	"tollgate/tools/webfetch"
)

var (
	_ prompt.Store   = (*store.DB)(nil)
	_ webfetch.Store = (*store.DB)(nil)
	_ bot.Store      = (*store.DB)(nil)
)
