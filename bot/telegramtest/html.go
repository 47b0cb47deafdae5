package telegramtest

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"

	"github.com/go-telegram/bot/models"
)

// MaxTextLength is Telegram's limit on a message's text after entity
// parsing, in UTF-16 code units.
const MaxTextLength = 4096

// MaxCaptionLength is Telegram's limit on a caption after entity parsing.
const MaxCaptionLength = 1024

// utf16Len counts as Telegram does: offsets and limits are in UTF-16 code
// units, so an emoji counts twice.
func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}

// tagEntity maps Telegram's allowed HTML tags to entity types.
var tagEntity = map[string]models.MessageEntityType{
	"b": models.MessageEntityTypeBold, "strong": models.MessageEntityTypeBold,
	"i": models.MessageEntityTypeItalic, "em": models.MessageEntityTypeItalic,
	"u": models.MessageEntityTypeUnderline, "ins": models.MessageEntityTypeUnderline,
	"s": models.MessageEntityTypeStrikethrough, "strike": models.MessageEntityTypeStrikethrough, "del": models.MessageEntityTypeStrikethrough,
	"tg-spoiler": models.MessageEntityTypeSpoiler, "span": models.MessageEntityTypeSpoiler,
	"a":          models.MessageEntityTypeTextLink,
	"code":       models.MessageEntityTypeCode,
	"pre":        models.MessageEntityTypePre,
	"blockquote": models.MessageEntityTypeBlockquote,
	"tg-emoji":   models.MessageEntityTypeCustomEmoji,
}

type openTag struct {
	name   string
	offset int // UTF-16 offset of the entity's start in the parsed text
	entity models.MessageEntity
}

// ParseHTML parses text as Telegram's parse_mode HTML: it returns the plain
// text and its entities, or an error worded as Telegram words it
// ("can't parse entities: ..."). It is strict where Telegram is: only the
// documented tags and attributes, properly nested, nothing inside code, only
// code inside pre, the four named entities plus numeric ones, and no bare '<'
// or '&'.
func ParseHTML(src string) (string, []models.MessageEntity, error) {
	var out strings.Builder
	var entities []models.MessageEntity
	var stack []openTag
	pos := 0 // UTF-16 length of out
	fail := func(i int, format string, args ...any) (string, []models.MessageEntity, error) {
		return "", nil, fmt.Errorf("can't parse entities: %s at byte offset %d", fmt.Sprintf(format, args...), i)
	}
	for i := 0; i < len(src); {
		c := src[i]
		switch c {
		case '&':
			end := strings.IndexByte(src[i:], ';')
			if end < 0 || end > 12 {
				return fail(i, "Character '&' is reserved and must be escaped with \"&amp;\"")
			}
			name := src[i+1 : i+end]
			var r string
			switch {
			case name == "lt":
				r = "<"
			case name == "gt":
				r = ">"
			case name == "amp":
				r = "&"
			case name == "quot":
				r = "\""
			case strings.HasPrefix(name, "#x") || strings.HasPrefix(name, "#X"):
				n, err := strconv.ParseUint(name[2:], 16, 32)
				if err != nil || n == 0 || n > 0x10FFFF {
					return fail(i, "Unsupported HTML entity %q", "&"+name+";")
				}
				r = string(rune(n))
			case strings.HasPrefix(name, "#"):
				n, err := strconv.ParseUint(name[1:], 10, 32)
				if err != nil || n == 0 || n > 0x10FFFF {
					return fail(i, "Unsupported HTML entity %q", "&"+name+";")
				}
				r = string(rune(n))
			default:
				return fail(i, "Unsupported HTML entity %q", "&"+name+";")
			}
			out.WriteString(r)
			pos += utf16Len(r)
			i += end + 1
		case '<':
			end := strings.IndexByte(src[i:], '>')
			if end < 0 {
				return fail(i, "Unclosed start tag")
			}
			body := src[i+1 : i+end]
			if strings.HasPrefix(body, "/") {
				name := strings.ToLower(strings.TrimSpace(body[1:]))
				if len(stack) == 0 {
					return fail(i, "Unexpected end tag")
				}
				top := stack[len(stack)-1]
				if top.name != name {
					return fail(i, "Unmatched end tag at byte offset %d, expected \"</%s>\", found \"</%s>\"", i, top.name, name)
				}
				stack = stack[:len(stack)-1]
				e := top.entity
				e.Offset = top.offset
				e.Length = pos - top.offset
				if e.Length > 0 {
					entities = append(entities, e)
				}
				i += end + 1
				continue
			}
			name, attrs, err := parseTag(body)
			if err != nil {
				return fail(i, "%v", err)
			}
			typ, ok := tagEntity[name]
			if !ok {
				return fail(i, "Unsupported start tag %q", name)
			}
			if len(stack) > 0 {
				parent := stack[len(stack)-1].name
				if parent == "code" || (parent == "pre" && name != "code") {
					return fail(i, "Can't nest %q inside %q", name, parent)
				}
			}
			e := models.MessageEntity{Type: typ}
			for k, v := range attrs {
				switch {
				case name == "a" && k == "href":
					e.URL = v
				case name == "span" && k == "class" && v == "tg-spoiler":
				case name == "code" && k == "class" && strings.HasPrefix(v, "language-"):
					e.Language = strings.TrimPrefix(v, "language-")
				case name == "blockquote" && k == "expandable":
					e.Type = models.MessageEntityTypeExpandableBlockquote
				case name == "tg-emoji" && k == "emoji-id":
					e.CustomEmojiID = v
				default:
					return fail(i, "Unsupported attribute %q of tag %q", k, name)
				}
			}
			if name == "a" && e.URL == "" {
				return fail(i, "Tag \"a\" must have attribute \"href\"")
			}
			if name == "span" && attrs["class"] != "tg-spoiler" {
				return fail(i, "Tag \"span\" must have class \"tg-spoiler\"")
			}
			if name == "code" && len(stack) > 0 && stack[len(stack)-1].name == "pre" && e.Language != "" {
				// <pre><code class="language-x"> sets the pre's language.
				stack[len(stack)-1].entity.Language = e.Language
			}
			stack = append(stack, openTag{name: name, offset: pos, entity: e})
			i += end + 1
		default:
			j := i + 1
			for j < len(src) && src[j] != '&' && src[j] != '<' {
				j++
			}
			out.WriteString(src[i:j])
			pos += utf16Len(src[i:j])
			i = j
		}
	}
	if len(stack) > 0 {
		return fail(len(src), "Can't find end tag corresponding to start tag %q", stack[len(stack)-1].name)
	}
	return out.String(), entities, nil
}

// parseTag splits the inside of a start tag into its lower-cased name and
// attributes.
func parseTag(body string) (string, map[string]string, error) {
	if body == "" || strings.ContainsAny(body[:1], " \t\n") {
		return "", nil, fmt.Errorf("Empty tag name")
	}
	body = strings.TrimSpace(strings.TrimSuffix(body, "/"))
	n := strings.IndexAny(body, " \t\n")
	if n < 0 {
		if body == "" {
			return "", nil, fmt.Errorf("Empty tag name")
		}
		return strings.ToLower(body), nil, nil
	}
	name, rest := strings.ToLower(body[:n]), strings.TrimSpace(body[n:])
	attrs := map[string]string{}
	for rest != "" {
		eq := strings.IndexAny(rest, "= \t\n")
		if eq < 0 || rest[eq] != '=' {
			key := rest
			if eq >= 0 {
				key = rest[:eq]
			}
			attrs[strings.ToLower(key)] = ""
			if eq < 0 {
				break
			}
			rest = strings.TrimSpace(rest[eq:])
			continue
		}
		key := strings.ToLower(strings.TrimSpace(rest[:eq]))
		rest = strings.TrimSpace(rest[eq+1:])
		var val string
		if rest != "" && (rest[0] == '"' || rest[0] == '\'') {
			q := rest[0]
			end := strings.IndexByte(rest[1:], q)
			if end < 0 {
				return "", nil, fmt.Errorf("Unclosed attribute value")
			}
			val, rest = rest[1:1+end], strings.TrimSpace(rest[end+2:])
		} else {
			end := strings.IndexAny(rest, " \t\n")
			if end < 0 {
				end = len(rest)
			}
			val, rest = rest[:end], strings.TrimSpace(rest[end:])
		}
		// Attribute values may carry the same entities as text.
		plain, _, err := ParseHTML(strings.ReplaceAll(val, "<", "&lt;"))
		if err != nil {
			return "", nil, err
		}
		attrs[key] = plain
	}
	return name, attrs, nil
}
