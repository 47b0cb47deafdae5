// Package prompt is Tollgate's agent core: tools with approval gates, the
// completion loop that pauses when a call needs a human, and the service
// that keeps the active completions. It knows nothing of Telegram or SQL;
// it declares the Store and Model it needs.
//
// # Lifecycle
//
// Service.Create saves a prompt and runs its loop in the background: call
// the model, run its tool calls in order, repeat until the model answers
// without tool calls. Each call's input is checked against the tool's
// JSON Schema before its gate runs. When a gate requires approval the call
// is saved as pending and the prompt as waiting_for_approval, then
// approval-requested is emitted and the loop returns. Approve or Reject
// saves the decision as a compare-and-set (the loser gets ErrNotPending),
// then resumes the loop in the background. Every call is saved as
// executing just before it runs, so a restart never runs it twice: Recover
// turns it into an "outcome unknown" error result.
//
// # Events
//
// Listeners run after the save they report (an ended prompt whose final
// save failed is still reported ended: the store keeps the older state and
// the next start resumes from it), in registration order, on the
// goroutine that made the change: the loop's goroutine for changes the
// loop makes, the caller's for decisions and Cancel, Recover's caller for
// re-emitted approval requests. A completion's own listeners run before
// the service-wide ones. A completion is removed from the service's active
// set before the completed listeners run. Listeners must not block on a
// human or a slow network: hand such work to a goroutine you own. A
// listener may read the completion (Prompt, PendingRequest), decide or
// cancel it, but must not wait for it (Wait, Service.Close): it would wait
// for the loop it runs on. A decision's update is emitted before the
// resumed loop starts, so no listener hears of a tool's run before the
// decision that allowed it.
//
// Recover is for start-up: it skips prompts this service already runs.
//
// # Concurrency
//
// Service, Completion and MemStore are safe for concurrent use. Prompt
// values returned by Completion.Prompt are copies the caller owns.
package prompt
