// Package shell gives the agent one tool, shell.run, that runs a bash
// script in a working directory, and the parsing that lets the operator's
// rules and a human judge each command the script runs.
//
// # What a script runs
//
// Extract parses a script with mvdan.cc/sh (bash syntax), never by hand,
// and lists every simple command in it: across &&, ||, ;, |, |& and &,
// in subshells, blocks, if, while, for, case and function bodies, and in
// the words of any command: $( ) and backticks, <( ) and >( ), double
// quotes, ${x:-…} defaults, arithmetic, [[ ]], redirect targets and
// assignments (X=$(rm y) ls lists rm y). A command is listed before
// those inside its own words. Comments and line continuations are read
// as bash reads them; quoted operators ("a && b") are arguments.
//
// A word is static when it holds only literals and quotes without
// expansions; its value is what the shell passes. Any other word
// ($x, $(…), *.go, {a,b}, ~/x, $'…') is kept as written. A command whose
// name is not static (${x}rm, $CMD, $(which rm), *) is Dynamic: what runs
// is known only when it runs, so no rule or grant can allow it unasked.
// Dynamic too: a shell without -c (bash script.sh, curl x | sh), source
// and ., eval or bash -c of a word that is not static, find -exec {}, an
// xargs command whose name holds its replacement string, and a wrapper
// whose options are not all known (one might take a value and hide the
// command).
//
// Wrappers that only run another command are peeled, and the command they
// run is listed in their place: env, nice, timeout, nohup, command,
// builtin, exec, stdbuf, ionice, setsid, time and xargs (whose arguments
// come from its input; xargs alone runs echo). Run alone (env, command -v
// x, exec with only redirections, ionice -p) they are the command.
// sudo and doas are listed themselves (as written, whole) and the command
// they run after them: who a command runs as is part of what it does, so
// an allow rule must cover both. find is listed and so is the command of
// each -exec, -execdir, -ok and -okdir.
//
// The strings of bash -c, sh -c (zsh, dash, ksh, mksh; any path to them),
// eval (its arguments joined by spaces) and trap are parsed again and
// their commands listed, up to maxDepth levels; deeper is ErrTooDeep.
//
// [[ ]], (( )), let and for (( )) are listed as commands too (Name "[[",
// "((", "let", "for"): bash evaluates their operands as arithmetic, and
// arithmetic runs the substitutions in an array subscript held in a
// string ([[ 'a[$(rm x)]' -eq 0 ]] runs rm x), which no parse sees; one
// that holds a quoted or escaped word is Dynamic.
//
// A variable set is listed as a command of its own, because it can change
// what later commands do (PATH=/tmp/x; git status): X=1 alone or before a
// command (env X=1 rm x lists "X=1" and "rm x"), Name "X=";
// export/declare/local/readonly/typeset, Name the keyword; a for or
// select loop's variable, Text "for f in *.go", Name "for".
//
// Redirections that write files (>, >>, &>, >|, <>, >&file) are listed in
// Writes; fd duplications (2>&1, >&-) and /dev/null, /dev/stdout and
// /dev/stderr are not.
//
// Not seen: code a command runs from its own arguments in its own language
// (python -c, awk's system(), git aliases, make, ssh host cmd, watch, flock,
// parallel). An allow rule for such a command allows what it runs.
//
// # How calls are judged
//
// Every call asks a human unless the operator's rules allow it. The tool's
// Parts are one per command (Label and "command" field: Text; "name"
// field: Name) and one per file written (Label "writes f", "command"
// field "> f", "name" field ">"), so "allow echo *" does not let
// "echo x > ~/.bashrc" run unasked. A script that does not parse has no
// parts: it always asks, and the request says why.
//
// An "always" grant covers the exact list of commands and writes, in
// order, and the dir: "git status" and "git  status" share one; "git
// status; rm x" has its own; it is never "the first word". Where the list
// does not say all the script does (a word known only when it runs, a
// here-document or here-string, a parse error), the grant covers the
// script text exactly.
//
// # Running
//
// A call runs bash -c SCRIPT in the working directory (Config.Dir), or in
// dir below it (absolute dirs, "..", and symlinks that lead out are
// refused), with stdin empty and only the allowlisted variables (Config.Env)
// of the bot's environment: its token and keys never reach the script.
// It runs in a process group of its own; when bash exits, when the timeout
// passes, or when the context is canceled, the whole group is killed, so
// nothing the script started outlives the call (a process that left the
// group, by setsid, is not reached). Stdout and stderr are each kept up to
// Config.MaxOutput bytes and marked where cut. The result gives the exit
// status or the timeout, and both streams. This is approval, not a
// sandbox: an approved command can do what the bot's user can.
//
// # Concurrency
//
// Extract and a Shell and its tool are safe for concurrent use. A call
// starts goroutines to read the output and wait for bash and ends them
// before it returns; a Shell needs no Close.
package shell
