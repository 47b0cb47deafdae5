// Package telegramtest is a fake Telegram Bot API for tests: an httptest
// server that parses requests as Telegram does (the go-telegram/bot client
// always posts multipart forms, with JSON-valued fields such as reply_markup
// as strings), validates what Telegram validates (HTML entities, 4096
// characters after parsing, inline keyboard buttons, 64-byte callback data),
// keeps chats and messages with per-chat message IDs, serves getUpdates with
// real long polling and Telegram's offset semantics or delivers to a webhook
// with its secret header, and records every call.
//
// Tests drive it as users would (UserMessage, UserReply, Press), wait for
// what the bot does (WaitCall, WaitCalls, Await) and inject faults (Fail with
// TooManyRequests, ServerError or BadRequest). Unknown methods answer 404, a
// wrong token 401, as Telegram does. EnforceRates makes it refuse, with
// Telegram's 429 and retry_after, messages beyond Telegram's flood limits.
//
// Clock is a manual clock for code that takes one (bot.Config.Clock):
// a test advances it instead of sleeping, and UseClock makes the server
// record call times, and enforce rates, on the same clock.
//
// A Server is safe for concurrent use. WaitCall and WaitCalls fail the test
// and so belong on the test's goroutine; Await may be called from any.
package telegramtest
