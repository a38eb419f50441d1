package consumer

import (
	"fmt"
	"regexp"
)

// maxRegexBytes bounds a subscription regex (Kafka has no such bound; RE2 compiles
// in time linear in the pattern, but a group keeps every distinct pattern).
const maxRegexBytes = 4096

// CompileRegex compiles a SubscribedTopicRegex. Kafka compiles it with Google's RE2/J
// and matches whole topic names (Matcher.matches), so the pattern is anchored at both
// ends here. Go's regexp is RE2 too: the syntax is the same but for RE2/J's Java-style
// flags and classes (\p{javaLowerCase} and the like), which Go refuses, and Go's \b and
// \w, which are ASCII-only as in RE2/J. A pattern Go refuses is INVALID_REGULAR_EXPRESSION.
func CompileRegex(pattern string) (*regexp.Regexp, error) {
	if len(pattern) > maxRegexBytes {
		return nil, fmt.Errorf("SubscribedTopicRegex is longer than %d bytes", maxRegexBytes)
	}
	re, err := regexp.Compile(`^(?:` + pattern + `)$`)
	if err != nil {
		return nil, fmt.Errorf("SubscribedTopicRegex `%s` is not a valid regular expression: %v", pattern, err)
	}
	return re, nil
}
