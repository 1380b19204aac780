package evaluator

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"
	"golang.org/x/text/unicode/norm"

	"github.com/vmipam/vmipam/policies/consumer"
)

// The characters a skip rule's message may hold. A message becomes one item of the NetworkReady
// message ("<Type>/<name>: <Reason>: <message>", items separated by "; ") and an event's note,
// so it must neither break a line nor show anything that reads as that separator. Refused:
//
//   - anywhere: a control or format character (bidi overrides, zero-width characters), a line or
//     paragraph separator, a private-use character, invalid UTF-8, any space but the ASCII space,
//     a default-ignorable character (Hangul fillers, variation selectors, the combining grapheme
//     joiner) or a symbol drawn empty (blankSymbols) — each renders blank or not at all — and
//     a look-alike of ';': any character that is ';' after NFKC normalization but not ';'
//     itself (U+037E GREEK QUESTION MARK, U+FF1B FULLWIDTH SEMICOLON, U+FE54 SMALL SEMICOLON),
//     and the other semicolons of Unicode (otherSemicolons);
//   - a combining mark on anything but a letter (not a modifier letter) or a digit
//     (onLetter): on punctuation it redraws it (',' and a dot above read as ';');
//   - a ';' followed by a space or a combining mark, or preceded by a space: "; " is the
//     separator, and " ;" reads as "; " once a right-to-left script reverses it.

// separatorName names the items' separator in messageError's texts without spelling it: an
// error text lands in the condition through SafeMessage too, which would defuse a spelled "; "
// into a "," and make the text say the separator is ", ".
const separatorName = `separator of the NetworkReady message's items (";" and a space)`

// messageError says why s cannot be written into the NetworkReady message, naming the first
// offending character and its byte offset, or "" when it can. Both a static message (at
// compile time) and a messageExpression's result (at run time) are held to it.
func messageError(s string) string {
	prev := rune(-1)
	for i, r := range s {
		if why := refusedRune(s, i, r); why != "" {
			return fmt.Sprintf("message holds %s (%s) at byte %d: it could forge or hide the %s, or a line of an event",
				runeName(r), why, i, separatorName)
		}
		if r == ';' && (unicode.IsSpace(prev) || blankAfterSemicolon(nextRune(s, i))) {
			return fmt.Sprintf("message holds a %q next to a space or a combining mark at byte %d: it reads as the %s",
				";", i, separatorName)
		}
		prev = r
	}
	return ""
}

// SafeMessage is s fit to be one item of the NetworkReady message or an event's note, whatever
// produced it (a skip rule's static message stored before the rules above, an evaluation error
// quoting an input value, a controller text): every character refused anywhere becomes a space
// (a look-alike of ';' a ','), then every ';' next to a space or a combining mark becomes a ','.
// The result passes messageError. s itself when it passes already, which is the common case
// and allocates nothing.
func SafeMessage(s string) string {
	if messageError(s) == "" {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i, r := range s {
		switch {
		case refusedRune(s, i, r) == "":
			b.WriteRune(r)
		case semicolonLike(s, i, r):
			b.WriteByte(',')
		default:
			b.WriteByte(' ')
		}
	}
	out := []byte(b.String())
	for i, c := range out {
		if c != ';' {
			continue
		}
		next, _ := utf8.DecodeRune(out[i+1:])
		if (i > 0 && out[i-1] == ' ') || blankAfterSemicolon(next) {
			out[i] = ','
		}
	}
	return string(out)
}

// refusedRune says why r, at byte i of s, may appear nowhere in a message, or "".
func refusedRune(s string, i int, r rune) string {
	switch {
	case r < utf8.RuneSelf:
		if unicode.IsControl(r) {
			return "a control character"
		}
		return ""
	case r == utf8.RuneError:
		return "invalid UTF-8 or a replacement character"
	case unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp, unicode.Co):
		return "a control, format, private-use character or line or paragraph separator"
	case unicode.IsSpace(r) || unicode.Is(unicode.Zs, r):
		return "a space other than the ASCII space"
	case unicode.In(r, unicode.Other_Default_Ignorable_Code_Point, unicode.Variation_Selector) || isBlankSymbol(r):
		return "a character that renders blank or not at all"
	case semicolonLike(s, i, r):
		return "a look-alike of ';'"
	case unicode.In(r, unicode.Mn, unicode.Me) && !onLetter(s, i):
		return "a combining mark on a character that is no letter (or a modifier letter) or digit"
	}
	return ""
}

// onLetter: the combining marks that end s[:i] and the one at byte i sit on a letter that is
// no modifier letter, or on a digit. A mark belongs on a letter: on punctuation it redraws it
// — ',' with U+0307 COMBINING DOT ABOVE reads as ';', and "fine,̇ ClusterNetwork/db: Ready"
// would read as one item —, and so on a modifier letter drawn as punctuation (U+A4F9 LISU
// LETTER TONE NA PO is a ',', U+02BB a turned comma);
// on a space or at the start it stands alone.
func onLetter(s string, i int) bool {
	for i > 0 {
		r, size := utf8.DecodeLastRuneInString(s[:i])
		if !unicode.In(r, unicode.Mn, unicode.Me) {
			return (unicode.IsLetter(r) && !unicode.Is(unicode.Lm, r)) || unicode.IsDigit(r)
		}
		i -= size
	}
	return false
}

// otherSemicolons are the look-alikes of ';' that NFKC leaves as they are: every character of
// Unicode 14 whose name holds SEMICOLON (UnicodeData.txt) but U+003B itself and those NFKC maps
// to ';' (U+FE14, U+FE54, U+FF1B), and U+E003B TAG SEMICOLON, a format character refused anyway.
// UTS #39's confusables.txt maps U+037E GREEK QUESTION MARK to ';', which NFKC does too. And
// the letters drawn as ';' that no table maps to it: U+A4FC LISU LETTER TONE MYA NA (ꓼ, as in
// "fineꓼ ClusterNetwork/db: Ready").
var otherSemicolons = []rune{
	'\uA4FC',     // LISU LETTER TONE MYA NA
	'\u061B',     // ARABIC SEMICOLON
	'\u1364',     // ETHIOPIC SEMICOLON
	'\u204F',     // REVERSED SEMICOLON
	'\u236E',     // APL FUNCTIONAL SYMBOL SEMICOLON UNDERBAR
	'\u2E35',     // TURNED SEMICOLON
	'\uA6F6',     // BAMUM SEMICOLON
	'\U0001DA89', // SIGNWRITING SEMICOLON
}

// blankSymbols are graphic characters drawn as empty space, which Unicode's tables do not mark
// (they are neither spaces nor default-ignorable): U+2800 BRAILLE PATTERN BLANK, U+1D159
// MUSICAL SYMBOL NULL NOTEHEAD, and U+13441 EGYPTIAN HIEROGLYPH FULL BLANK and U+13442 HALF
// BLANK (Unicode 15, letters: gc=Lo), each named "BLANK" or "NULL" in UnicodeData.txt and
// drawn empty by the fonts that have them.
var blankSymbols = []rune{'\u2800', '\U0001D159', '\U00013441', '\U00013442'}

// isBlankSymbol: r is one of blankSymbols.
func isBlankSymbol(r rune) bool { return slices.Contains(blankSymbols, r) }

// semicolonLike: r, at byte i of s, is not ';' but reads as one: one of otherSemicolons, or its
// NFKC decomposition holds a ';'. The decomposition tables are read in place: nothing is
// allocated.
func semicolonLike(s string, i int, r rune) bool {
	if r < utf8.RuneSelf {
		return false
	}
	return slices.Contains(otherSemicolons, r) || bytes.IndexByte(norm.NFKC.PropertiesString(s[i:]).Decomposition(), ';') >= 0
}

// blankAfterSemicolon: r, right after a ';', would make it read as the items' separator.
func blankAfterSemicolon(r rune) bool {
	return unicode.IsSpace(r) || unicode.Is(unicode.M, r) || isBlankSymbol(r)
}

// nextRune is the rune after the one at byte i of s, or -1 at the end.
func nextRune(s string, i int) rune {
	_, size := utf8.DecodeRuneInString(s[i:])
	if i+size >= len(s) {
		return -1
	}
	r, _ := utf8.DecodeRuneInString(s[i+size:])
	return r
}

// runeName is r as "U+037E", with the character itself when it is visible.
func runeName(r rune) string {
	if unicode.IsGraphic(r) && !unicode.IsSpace(r) && !unicode.Is(unicode.M, r) {
		return fmt.Sprintf("U+%04X %q", r, r)
	}
	return fmt.Sprintf("U+%04X", r)
}

// QuoteName is a name taken from an object fit to be shown inside the NetworkReady message, an
// event's note or a printed table: consumer.QuoteName, where the record's consumers find it.
func QuoteName(s string) string { return consumer.QuoteName(s) }

// truncate is s cut to 64 bytes (see cut), for quoting an input value in an error.
func truncate(s string) string { return cut(s, 64) }

// cut is s cut to at most max bytes followed by "…" when longer, on a UTF-8 character boundary
// (a cut character would be invalid UTF-8 in a message, an event or the JSON of a trace).
func cut(s string, max int) string {
	if len(s) <= max {
		return s
	}
	n := max
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// alwaysFallsBack says why every result of the messageExpression e is a message a rule may not
// hold, so that it always falls back to the static message, or returns "": e is a string
// literal the message check refuses, or concatenates one holding a line break or the items'
// separator (which no text around it can make acceptable).
func alwaysFallsBack(e ast.Expr) string {
	if s, ok := stringLiteral(e); ok {
		if why := messageError(s); why != "" {
			return "the message is constant and may not be a message (" + why + "): it always falls back to `message`"
		}
		return ""
	}
	var why string
	var walk func(ast.Expr)
	walk = func(x ast.Expr) {
		if x.Kind() == ast.CallKind && x.AsCall().FunctionName() == operators.Add {
			for _, a := range x.AsCall().Args() {
				walk(a)
			}
			return
		}
		if s, ok := stringLiteral(x); ok && why == "" && (strings.ContainsAny(s, "\r\n") || strings.Contains(s, "; ")) {
			why = fmt.Sprintf("its literal %s holds a line break or the %s, so every message it builds does: "+
				"it always falls back to `message`", strconv.QuoteToASCII(truncate(s)), separatorName)
		}
	}
	walk(e)
	return why
}

// stringLiteral is e's value when e is a string literal.
func stringLiteral(e ast.Expr) (string, bool) {
	if e.Kind() != ast.LiteralKind {
		return "", false
	}
	s, ok := e.AsLiteral().(types.String)
	return string(s), ok
}
