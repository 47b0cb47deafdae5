package bot

import (
	"testing"
	"unicode/utf16"
)

func TestCutMentions(t *testing.T) {
	for _, tc := range []struct {
		text string
		cut  [][2]int // in UTF-16 units
		want string
	}{
		{"@test_bot what is on example.com", [][2]int{{0, 9}}, "what is on example.com"},
		{"@test_bot, fetch it", [][2]int{{0, 9}}, "fetch it"},
		{"please @test_bot fetch it", [][2]int{{7, 16}}, "please fetch it"},
		{"fetch it @test_bot", [][2]int{{9, 18}}, "fetch it"},
		{"😀 @test_bot run\n  {\"a\": 1}", [][2]int{{3, 12}}, "😀 run\n  {\"a\": 1}"},
		{"@test_bot @test_bot twice", [][2]int{{0, 9}, {10, 19}}, "twice"},
		{"@test_bot", [][2]int{{0, 9}}, ""},
	} {
		if got := cutMentions(utf16.Encode([]rune(tc.text)), tc.cut); got != tc.want {
			t.Errorf("cutMentions(%q, %v) = %q, want %q", tc.text, tc.cut, got, tc.want)
		}
	}
}
