// Package storetest is the conformance suite of Tollgate's stores: one
// set of tests that the SQLite store (package store) and the PostgreSQL
// store (package store/postgres) must both pass, so that the two keep the
// same semantics — compare-and-set on a prompt's revision, one winner per
// decision, the outbox's order, the inbox's duplicates, grants, votes,
// deadlines and the audit.
//
// It is imported by tests only.
package storetest

import (
	"context"
	"testing"
	"time"

	"tollgate/bot"
	"tollgate/prompt"
	"tollgate/tools/webfetch"
)

// Backend is what both stores implement: the storage interfaces of every
// package that keeps state.
type Backend interface {
	prompt.Store
	prompt.Leases
	bot.Store
	webfetch.Store
	// Ping reports whether the database answers.
	Ping(context.Context) error
}

// Opener opens a new, empty store for one test, closed at its end. now is
// the clock of the store's own bookkeeping times; nil means time.Now.
type Opener func(t *testing.T, now func() time.Time) Backend

// Run runs every test of the suite against stores open makes, each test
// on its own store and in parallel with the others.
func Run(t *testing.T, open Opener) {
	for _, tc := range []struct {
		name string
		test func(*testing.T, Opener)
	}{
		// Prompts.
		{"PromptRoundTripsWithItsApprovals", testPromptRoundTripsWithItsApprovals},
		{"PromptWithoutItemsRoundTrips", testPromptWithoutItemsRoundTrips},
		{"CreatePromptRefusesASecondUnfinishedPromptInAConversation", testCreatePromptRefusesASecondUnfinishedPromptInAConversation},
		{"SavePromptIsACompareAndSetOnTheRevision", testSavePromptIsACompareAndSetOnTheRevision},
		{"SavePromptRejectsBadInput", testSavePromptRejectsBadInput},
		{"SavePromptWritesOnlyTheChangedItems", testSavePromptWritesOnlyTheChangedItems},
		{"ANewApprovalMustBePendingAndItsIDUnique", testANewApprovalMustBePendingAndItsIDUnique},
		{"PendingMayExpireWhenItsPromptEnds", testPendingMayExpireWhenItsPromptEnds},
		{"DecideIsACompareAndSetThatResumesThePrompt", testDecideIsACompareAndSetThatResumesThePrompt},
		{"DecideRaceHasOneWinner", testDecideRaceHasOneWinner},
		{"CancelPromptRejectsThePendingApproval", testCancelPromptRejectsThePendingApproval},
		{"RunningPromptsArePagedAndBounded", testRunningPromptsArePagedAndBounded},
		{"History", testHistory},
		// The outbox.
		{"NoticesAreRecordedWithTheirChange", testNoticesAreRecordedWithTheirChange},
		{"CancelRecordsTheOutcomeOfThePendingApproval", testCancelRecordsTheOutcomeOfThePendingApproval},
		{"DueNoticesAreEachConversationsOldestAndResendsLast", testDueNoticesAreEachConversationsOldestAndResendsLast},
		{"ClaimNoticeIsACompareAndSetThatLapses", testClaimNoticeIsACompareAndSetThatLapses},
		{"ClaimNoticeRaceHasOneWinner", testClaimNoticeRaceHasOneWinner},
		{"PingAnswers", testPingAnswers},
		// Votes.
		{"VoteDecidesAtQuorumOnce", testVoteDecidesAtQuorumOnce},
		{"VoteAfterRejectionIsNotPending", testVoteAfterRejectionIsNotPending},
		{"ConcurrentVotesDecideOnce", testConcurrentVotesDecideOnce},
		// Chats, approval messages, the web-fetch allowlist.
		{"Chats", testChats},
		{"ApprovalMessages", testApprovalMessages},
		{"ApprovalMessagesInSeveralChats", testApprovalMessagesInSeveralChats},
		{"Domains", testDomains},
		// Deadlines.
		{"ApprovalDeadlinesAreKeptInTheRow", testApprovalDeadlinesAreKeptInTheRow},
		// The inbox.
		{"RecordUpdatesRecognisesADeliveryAgain", testRecordUpdatesRecognisesADeliveryAgain},
		{"RecordUpdatesIsAllOrNothing", testRecordUpdatesIsAllOrNothing},
		{"RecordUpdatesConcurrentDeliveriesAreNewOnce", testRecordUpdatesConcurrentDeliveriesAreNewOnce},
		{"UnhandledUpdatesPagesOldestFirst", testUnhandledUpdatesPagesOldestFirst},
		{"MarkHandled", testMarkHandled},
		{"PruneUpdatesDeletesOnlyOldHandledOnes", testPruneUpdatesDeletesOnlyOldHandledOnes},
		// The audit.
		{"EveryDecisionIsAuditedOnceWithItsSource", testEveryDecisionIsAuditedOnceWithItsSource},
		{"ALostDecisionIsNotAudited", testALostDecisionIsNotAudited},
		{"SavingARuledCallAgainAuditsItOnce", testSavingARuledCallAgainAuditsItOnce},
		{"AuditFiltersByConversationSinceAndLimitNewestFirst", testAuditFiltersByConversationSinceAndLimitNewestFirst},
		// Leases.
		{"LeaseIsHeldUntilItLapses", testLeaseIsHeldUntilItLapses},
		{"LeaseRaceHasOneWinner", testLeaseRaceHasOneWinner},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.test(t, open)
		})
	}
}
