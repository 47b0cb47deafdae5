// Package mcp gives the agent the tools of MCP servers (Model Context
// Protocol), run as commands over stdio or reached over streamable HTTP,
// with the official Go SDK as the client.
//
// ParseConfig reads the servers from the mcpServers file other MCP
// clients use (MCP_SERVERS); New starts a goroutine per server and
// returns a Manager, a prompt.ToolSource whose tools are named
// mcp.<server>.<tool> and carry the server's description and input
// schema. The prompt service validates input against that schema before
// any gate, as for every tool.
//
// # Who decides a call
//
// Every tool of a server asks a person unless the operator's rules or a
// grant allow the call (by name and input, as for built-in tools), with
// one exception: a tool the server marks readOnlyHint runs unasked when
// the operator set "trustHints" for that server. The approval request
// says what the server claims of the tool: destructive, not destructive,
// or nothing (which the protocol reads as "may be destructive"). Hints
// are claims of the server, never checked.
//
// # Failures
//
// A server that cannot start does not stop New: it is logged, tried
// again with backoff, reported by Status, and its tools are absent until
// it starts. A server that stops is started again with backoff; its
// tools stay offered meanwhile and their calls fail with an error that
// says the server is restarting and why. A call that outlives
// Options.Timeout is cancelled (the SDK sends notifications/cancelled)
// and the model told so. A call the server was running when the
// connection failed fails with "outcome unknown" and is never sent
// again, by this package or, after a crash of the bot, by the prompt
// service, which treats a call it finds executing as outcome unknown.
//
// A stdio server gets its own env and PATH and HOME, nothing else of the
// bot's environment: the bot's tokens do not leak to it.
//
// # Concurrency and order
//
// A Manager and its tools are safe for concurrent use. Each server has
// one goroutine, owned by the Manager and ended by Close; it starts the
// server, lists its tools, and lists them again when the server sends
// notifications/tools/list_changed. OnChange listeners run on that
// goroutine after each listing, in the order registered; for one server
// the listings, and so the calls to listeners, come in order, while
// different servers' come in any order. New returns once each server's
// first start succeeded or failed, or when its ctx ends; a listener
// registered after New sees those first listings in Tools, and is told
// of every listing after.
package mcp
