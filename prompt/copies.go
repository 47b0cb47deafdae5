package prompt

// ApprovalCopy is one message that shows an approval: the chat it sits in
// and its ID there. The bot keeps these (the core never reads them); the
// type lives here so that the bot's store interface and the store that
// implements it share it without importing each other. An approval's
// copies may sit in several chats: its conversation's, and with private
// notification each approver's private chat with the bot.
type ApprovalCopy struct {
	ChatID    int64
	MessageID int
}
