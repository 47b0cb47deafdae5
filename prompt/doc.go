// Package prompt is Tollgate's agent core: tools with approval gates, the
// steps that take a prompt from a user's message to an answer, pausing
// when a call needs a human, and the service that runs them. It knows
// nothing of Telegram or SQL; it declares the Store and Model it needs.
//
// # The stored record is the truth
//
// A prompt advances by steps. A worker loads it, applies one transition
// (a model turn, the gate or the run of one call, a pause, the end) to a
// copy, and saves the copy as revision Rev+1 with a compare-and-set on
// Rev. A save that loses (a decision, a cancel or another process moved
// the prompt on) is not undone by hand: the step loads the prompt again
// and applies its change to that, if it still applies. Listeners hear of
// a change only after its save.
//
// Approve, Reject and Cancel are compare-and-set writes in the store keyed
// by the approval's (or the prompt's) ID, followed by a kick to run the
// prompt's next steps; they need nothing in memory, so a press on a
// message sent before a restart works at once. The loser of two decisions
// gets ErrNotPending; an unknown ID ErrNotFound.
//
// Every call is saved executing just before it runs, so a restart never
// runs it twice: Recover turns it into an "outcome unknown" error result.
// A call whose approval was saved but which never started runs after a
// restart. Waiting prompts cost nothing while they wait: Recover resumes
// only the running ones and hands out the waiting ones page by page.
//
// # Workers
//
// Prompts that are running are advanced by Config.Workers goroutines,
// owned by the Service and stopped by Close. A prompt keeps its worker
// until it pauses or ends; the others wait in line, in the order they
// were created or resumed, and Create says how many are ahead.
//
// # Replicas
//
// With Config.Leases, several processes may share one store:
// a pass over a prompt holds the lease "prompt:<id>" for Config.Replica,
// renewed every LeaseTTL/3 on the service's clock, and a replica that
// finds it held leaves the prompt to the holder. Every LeaseTTL a loop
// the Service owns (started with the workers or by Recover, stopped by
// Close) takes over running prompts whose lease lapsed, repairing them
// under the lease as Recover does. The compare-and-set on Rev still keeps
// the record true when a stalled replica acts after its lease lapsed.
//
// # Events
//
// Listeners (OnApprovalRequested, OnEnded, OnActivity) run on the worker's
// goroutine after the save they report, in registration order. They must
// not block on a human or a slow network: hand such work to a goroutine
// you own. They may call the Service (decide, cancel, read), but must not
// wait for Close.
//
// # Concurrency
//
// Service is safe for concurrent use; a Waiting is read by one goroutine.
// Prompt values are plain data: what the store returns is the caller's to
// keep and change.
package prompt
