// Package webfetch gives the agent its tools to read the web: a fetch
// tool gated by a domain allowlist, and tools that list, extend and shrink
// that allowlist. Extending the list needs a human's approval; fetching a
// host that is not listed needs a human's approval of that one call. An
// entry "*.example.com" lists the subdomains of example.com; one that the
// model added stops where a public suffix begins, so "*.amazonaws.com"
// does not list a bucket under the public suffix s3.amazonaws.com.
//
// Fetching cannot be turned inward: the destination address and port are
// checked where the connection is made (a net.Dialer Control hook), so a
// name that resolves to a private address, or that is rebound between a
// check and the connect, is refused. Every redirect hop is checked again.
// Config.AllowPrivate lifts the address and port checks for local
// development; an internal host the operator seeded by name (localhost,
// 127.0.0.1, nas.local) is exempt from them on its own. Cloud metadata
// addresses stay refused even then, also in the IPv6 forms that carry an
// IPv4 address (mapped, NAT64, 6to4, Teredo).
//
// # Concurrency
//
// Fetcher, its tools and MemStore are safe for concurrent use. A Fetcher
// starts no goroutine of its own and keeps no idle connection between
// fetches, so it needs no Close.
package webfetch
