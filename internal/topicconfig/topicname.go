package topicconfig

import (
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
)

// MaxTopicNameLength is Kafka's Topic.MAX_NAME_LENGTH.
const MaxTopicNameLength = 249

// Internal topic names (Topic.java).
const (
	ConsumerOffsetsTopic  = "__consumer_offsets"
	TransactionStateTopic = "__transaction_state"
	ShareGroupStateTopic  = "__share_group_state"
	// ClusterMetadataTopic is KRaft's metadata log; it is never a regular topic.
	ClusterMetadataTopic = "__cluster_metadata"
)

// InternalTopics are the topics Kafka's Topic.isInternal reports as internal.
var InternalTopics = []string{ConsumerOffsetsTopic, TransactionStateTopic, ShareGroupStateTopic}

// IsInternal reports whether name is an internal topic.
func IsInternal(name string) bool {
	for _, t := range InternalTopics {
		if t == name {
			return true
		}
	}
	return false
}

// ValidateTopicName is Kafka's Topic.validate: INVALID_TOPIC_EXCEPTION with Kafka's message
// when the name is empty, "." or "..", longer than 249 characters, or has a character
// outside [a-zA-Z0-9._-].
func ValidateTopicName(name string) error {
	reason := ""
	switch {
	case name == "":
		reason = "the empty string is not allowed"
	case name == ".":
		reason = "'.' is not allowed"
	case name == "..":
		reason = "'..' is not allowed"
	case len(name) > MaxTopicNameLength:
		// Only ASCII names can be valid, so counting bytes is enough: a longer non-ASCII
		// name is invalid either way (Kafka counts UTF-16 units; the reason differs only
		// for names that fail both rules).
		reason = "the length of '" + name + "' is longer than the max allowed length " + strconv.Itoa(MaxTopicNameLength)
	case !legalChars(name):
		reason = "'" + name + "' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"
	}
	if reason == "" {
		return nil
	}
	return &Error{Kind: kerr.InvalidTopicException, Message: "Topic name is invalid: " + reason}
}

func legalChars(name string) bool {
	for i := 0; i < len(name); i++ {
		c := name[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
		if !ok {
			return false
		}
	}
	return true
}

// HasCollisionChars reports whether a name contains '.' or '_', which metric names cannot
// tell apart.
func HasCollisionChars(name string) bool { return strings.ContainsAny(name, "._") }

// CollisionKey is Topic.unifyCollisionChars: two topics whose keys are equal collide
// ("a.b" and "a_b"). Kafka's CreateTopics refuses a new topic whose key equals an existing
// topic's with INVALID_TOPIC_EXCEPTION "Topic 'a.b' collides with existing topic: a_b" and
// only warns when a name merely has collision characters.
func CollisionKey(name string) string { return strings.ReplaceAll(name, ".", "_") }
