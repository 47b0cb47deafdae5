// Package bot is Tollgate's Telegram front end, on github.com/go-telegram/bot:
// each chat is one conversation with the agent, and every gated tool call
// becomes a message with ✅ Approve and ❌ Reject buttons.
//
// The bot talks to the agent through Service (satisfied by *prompt.Service)
// and keeps which chat a conversation is and which messages show an approval
// in a Store, so that buttons keep working across restarts. In a group the
// bot answers only what is addressed to it (group.go), and can send a
// group's requests to the approvers' private chats instead (notify.go).
//
// # Concurrency and ordering
//
// A Bot is safe for concurrent use. Every update is recorded in the
// store's inbox before Telegram is told it arrived (the bot long-polls
// getUpdates itself for that), so a crash loses none and a redelivery is
// handled once. Updates of one chat are handled one after the other, in
// order; chats do not wait for each other. Decisions still rely on the
// service's compare-and-set, so a double tap decides once. Events from the service
// (approval requested, prompt ended, worker activity) are handed to
// goroutines of the bot. Run starts the service's work itself, by calling
// its Recover after taking the answers a crash left undelivered, so an
// answer is sent either by that snapshot or by its ended event, never by
// both; the bot keeps no map of what was sent. "typing…" follows the
// activity events: it shows while a worker advances the chat's prompt, not
// while the prompt waits for a human or for a worker. Messages to Telegram
// all go through one paced, retrying path, so the order of messages to one
// chat is the order of their sends only within one goroutine. Run owns
// every goroutine the bot starts and returns after they have all stopped.
package bot
