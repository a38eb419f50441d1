package topicconfig

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Error is a config failure that maps one-to-one to a Kafka error code. Message is the text
// Kafka would put in the response's ErrorMessage field.
type Error struct {
	Kind    *kerr.Error // kerr.InvalidConfig, kerr.InvalidRequest or kerr.InvalidTopicException
	Message string
}

func (e *Error) Error() string { return e.Kind.Message + ": " + e.Message }

// Code is the Kafka error code for the response.
func (e *Error) Code() int16 { return e.Kind.Code }

// Unwrap lets errors.Is(err, kerr.InvalidConfig) work.
func (e *Error) Unwrap() error { return e.Kind }

func invalidConfig(format string, args ...any) *Error {
	return &Error{Kind: kerr.InvalidConfig, Message: fmt.Sprintf(format, args...)}
}

func invalidRequest(format string, args ...any) *Error {
	return &Error{Kind: kerr.InvalidRequest, Message: fmt.Sprintf(format, args...)}
}

// valueError formats like Kafka's ConfigException(name, value, message).
func valueError(name string, value any, msg string) *Error {
	return invalidConfig("Invalid value %s for configuration %s: %s", javaString(value), name, msg)
}
