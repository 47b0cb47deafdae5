// Package policy reads an approval rules file and decides, for one tool
// call, whether to deny it, ask a person, or allow it.
//
// It is a plain library: it knows nothing of the bot. The caller says which
// tools exist and what kind of value each of their fields holds ([Tool],
// [Kind]); [Parse] or [Load] check a rules file against that list, and
// [Rules.Decide] answers for one call. A [Rules] is not changed after it is
// made and may be used from many goroutines.
//
// # The rules file
//
// A YAML mapping with up to three lists, each optional:
//
//	# Checked in this order: deny, then ask, then allow. A rule matches when its
//	# tool matches and every field pattern matches.
//	deny:
//	  - tool: web-fetch.fetch
//	    host: "*.internal.example.com"
//	    reason: internal hosts stay internal
//	ask:
//	  - tool: "web-fetch.*"          # '*' only as a suffix of the tool name
//	allow:
//	  - tool: web-fetch.fetch
//	    host: docs.python.org
//	    path: "/3/**"
//	  - tool: web-fetch.fetch
//	    host: [docs.python.org, pkg.go.dev]   # a list: any of them matches
//	    path: ["/", "/search"]
//
// The top-level keys are deny, ask and allow and no others; each holds a list
// of rules (or nothing: "deny:" alone, an empty file and "{}" all mean no
// rules). A rule is a mapping:
//
//   - tool (required): a tool name, or a prefix ending in '*' ("web-fetch.*"
//     matches every tool whose name starts with "web-fetch."; "*" alone
//     matches every tool). '*' anywhere else is an error, and so is a name or
//     prefix that matches no known tool.
//   - reason (optional): words for a person, shown with the decision.
//   - any other key is a field of the tool's calls, and its value is a
//     pattern (a string) or a list of patterns, any of which may match. The
//     field must be a field of every tool the rule's tool names. A rule
//     matches a call when every field it names is in the call and matches;
//     a field the call does not have does not match.
//
// Decide checks every deny rule, then every ask rule, then every allow rule,
// each list in file order, and the first rule that matches decides. So a call
// that a deny rule and an allow rule both match is denied, and one that an ask
// rule and an allow rule both match is asked about. When no rule matches the
// Action is [None] and the caller's own default applies.
//
// Quote patterns that start with '*': to YAML an unquoted *.example.com is an
// alias, and the file is refused with a note saying so. YAML anchors, aliases,
// tags and merge keys are not supported, nor are several documents in a file.
//
// # Patterns
//
// How a pattern matches depends on the Kind of the field, which the caller's
// tool list gives.
//
// Text: a glob over the whole value. '*' matches any run of characters, '/'
// included; '?' one character; [abc], [a-z] and [^a-z] (or [!a-z]) a class;
// '\' makes the next character plain (\*, \?, \[, \\). Case matters.
//
//	"git status*"  matches "git status" and "git status --short"
//	"*.txt"        matches "a/b/notes.txt"
//
// Path: a URL or a file path, compared as given (pass decoded paths, as in
// url.URL.Path). '*', '?' and classes stay within one '/'-separated segment;
// a segment that is exactly '**' matches zero or more whole segments. '**'
// inside a longer segment ("a**") is an error.
//
//	"/docs/*"   matches "/docs/a" and "/docs/", not "/docs/a/b" nor "/docs"
//	"/3/**"     matches "/3", "/3/", "/3/a/b", not "/30"
//	"/a/**/z"   matches "/a/z" and "/a/b/c/z"
//
// Host: a host name, compared without regard to ASCII case and with one
// trailing dot ignored. "example.com" matches only example.com. "*.example.com"
// matches a.example.com and a.b.example.com, but not example.com itself, nor
// evilexample.com, nor example.com.evil.net. '*' may only be the whole leftmost
// label ("foo*.example.com" and "example.*" are errors); "*" alone matches any
// host. No other glob characters are allowed. Names are compared as given:
// the caller passes ASCII (punycode) host names, and a pattern with non-ASCII
// characters is an error asking for its xn-- form. An IP address is a host
// name of its own: "10.0.0.1" matches only that address.
//
// # Allow rules are strict
//
// A deny or ask rule should catch a value however it is written; an allow rule
// should let through only what it plainly names. So the same pattern matches
// a little more in a deny or ask rule than in an allow rule:
//
//   - Path, deny and ask: the value matches if the value as given, or the value
//     cleaned of "." and ".." segments and doubled slashes (path.Clean, which
//     keeps a URL's "scheme://host"), or either of those with %2e, %2f, %5c and
//     '\' decoded to '.', '/' and '/', matches. So "/admin/**" denies
//     "/public/../admin/x" and "/public/%2e%2e/admin".
//   - Path, allow: the value as given must match, and so must the value with
//     %2e, %2f, %5c and '\' decoded; and the value may hold no more ".."
//     segments and no more "//" than the pattern itself spells out. So
//     "/3/**" does not allow "/3/../admin" nor "/3//x".
//   - Host, allow: the value must be a plain host name (letters, digits, '-'
//     and '_' in non-empty dot-separated labels) or an IP address; a value such
//     as "a..example.com" or "evil.com:1.example.com" matches no allow rule,
//     though it may match a deny or ask rule.
//   - A tool that was not in the tool list given to Parse matches no allow
//     rule, and no rule that names a field (its fields have no Kind); deny and
//     ask rules that name only a tool pattern ("*", "web-*") still apply.
//
// # Errors
//
// Parse checks the whole file and returns every problem it finds, joined with
// errors.Join, each an [*Error] that names the file, the line and the rule:
//
//	rules.yaml:7: deny rule 2: unknown field "hots" for web-fetch.fetch (fields: host, path, url)
//
// Malformed YAML stops the check at the parser's first error, with its line.
package policy
