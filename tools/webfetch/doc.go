// Package webfetch gives the agent its tools to read the web: a fetch
// tool gated by a domain allowlist, and tools that list, extend and shrink
// that allowlist. Extending the list needs a human's approval; fetching a
// host that is not listed needs a human's approval of that one call. An
// entry "*.example.com" lists the subdomains of example.com; one that the
// model added stops where a public suffix begins, so "*.amazonaws.com"
// does not list a bucket under the public suffix s3.amazonaws.com.
//
// The allowlist has two parts. The operator's list (Config.Seed,
// WEBFETCH_ALLOWED_DOMAINS) is kept in memory and is authoritative: an
// entry taken off it is gone at the next start, and remove-domain cannot
// remove one. Entries a human approved through add-domain live in the
// Store until someone removes them. An approval of add-domain names the
// domain as it will be stored; input not written that way is refused
// before anyone is asked.
//
// An operator entry for an internal host may carry a port
// ("localhost:8080", "[::1]:8080", "nas.local:5000"): that host is then
// reachable on the ports so listed alone, where an entry without a port
// opens every port. A public host takes no port.
//
// Fetching cannot be turned inward: the destination address and port are
// checked where the connection is made (a net.Dialer Control hook), so a
// name that resolves to a private address, or that is rebound between a
// check and the connect, is refused. Every redirect hop is checked again.
// Config.AllowPrivate lifts the address and port checks for local
// development; an internal host the operator listed by name (localhost,
// 127.0.0.1, nas.local) is exempt from them on its own. Cloud metadata
// addresses stay refused even then, also in the IPv6 forms that carry an
// IPv4 address (mapped, NAT64, 6to4, Teredo).
//
// Before anyone is asked, a fetch refuses what could only fail or lead
// inward: a host without a dot, a cloud metadata service's name
// (metadata.platformequinix.com, metadata.tencentyun.com, …), and a name
// that spells a private, loopback or metadata address
// ("127.0.0.1.nip.io", "169-254-169-254.sslip.io"). A host on the
// operator's list by name is trusted and exempt.
//
// # Concurrency
//
// Fetcher, its tools and MemStore are safe for concurrent use. A Fetcher
// starts no goroutine of its own and keeps no idle connection between
// fetches, so it needs no Close.
package webfetch
