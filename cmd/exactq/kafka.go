package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The client commands talk to the brokers with franz-go: kgo for producing and consuming,
// kadm for administration, and kmsg requests sent through kgo where kadm drops something
// the CLI prints (a config's read-only flag, the broker's error message of share group
// requests) or lacks a call (group configs).

// adminTimeout is the broker-side timeout of topic operations (CreateTopics, DeleteTopics).
const adminTimeout = 30 * time.Second

// newKgo is a franz-go client for the -b brokers with the CLI's client id; opts add to or
// override the defaults.
func newKgo(f *cmdFlags, opts ...kgo.Opt) (*kgo.Client, error) {
	base := []kgo.Opt{kgo.SeedBrokers(f.brokerList()...), kgo.ClientID(cliClientID)}
	return kgo.NewClient(append(base, opts...)...)
}

// admin is a kadm client with the kgo client under it, for the kmsg requests kadm has no
// call for. Close closes both.
type admin struct {
	*kadm.Client
	kgo *kgo.Client
}

func newAdmin(f *cmdFlags) (*admin, error) {
	cl, err := newKgo(f)
	if err != nil {
		return nil, err
	}
	adm := kadm.NewClient(cl)
	adm.SetTimeoutMillis(int32(adminTimeout.Milliseconds()))
	return &admin{Client: adm, kgo: cl}, nil
}

// parseAdmin parses args as parse does and connects an admin client to the -b brokers, for
// the commands that take nothing but positional arguments; the caller closes it.
func (f *cmdFlags) parseAdmin(args []string, minArgs, maxArgs int) ([]string, *admin, error) {
	pos, err := f.parse(args, minArgs, maxArgs)
	if err != nil {
		return nil, nil, err
	}
	adm, err := newAdmin(f)
	if err != nil {
		return nil, nil, err
	}
	return pos, adm, nil
}

// brokerError is a Kafka error code that came with the broker's own message. It prints as
// "CODE: message" (the message replaces kerr's generic description of the code) and
// unwraps to the kerr value, so errors.Is(err, kerr.TopicAlreadyExists) holds.
type brokerError struct {
	err     *kerr.Error
	message string
}

func (e *brokerError) Error() string { return e.err.Message + ": " + e.message }
func (e *brokerError) Unwrap() error { return e.err }

// withMessage adds the broker's error message to err, a kerr value from a response (kadm's
// Err next to its ErrMessage); any other err, or no message, is err as it is.
func withMessage(err error, msg string) error {
	ke, ok := err.(*kerr.Error)
	if msg == "" || !ok {
		return err
	}
	return &brokerError{err: ke, message: msg}
}

// codeErr is the error of a response's code and message: nil for 0.
func codeErr(code int16, msg *string) error {
	err := kerr.ErrorForCode(code)
	if err == nil || msg == nil {
		return err
	}
	return withMessage(err, *msg)
}

// eachAnswer goes through the answers of an admin request about names (groups, transactional
// ids), in the order the user gave them: a name without an answer is skipped (reqErr, the
// request's error, says why), an answer whose errOf is set is reported under its name, and
// do handles the others. It returns reqErr joined with those errors and do's.
func eachAnswer[A any](names []string, answers map[string]A, reqErr error, errOf func(A) error, do func(name string, a A) error) error {
	errs := []error{reqErr}
	for _, name := range names {
		a, ok := answers[name]
		if !ok {
			continue
		}
		if err := errOf(a); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			continue
		}
		errs = append(errs, do(name, a))
	}
	return errors.Join(errs...)
}

// topicPartition names one partition.
type topicPartition struct {
	topic     string
	partition int32
}

func sortPartitions(tps []topicPartition) {
	sort.Slice(tps, func(i, j int) bool {
		if tps[i].topic != tps[j].topic {
			return tps[i].topic < tps[j].topic
		}
		return tps[i].partition < tps[j].partition
	})
}

// partitionList prints partitions as Kafka's TopicPartition.toString does: topic-N,
// comma-separated, sorted; "-" for none.
func partitionList(set kadm.TopicsSet) string {
	var s []string
	for _, tp := range set.Sorted() {
		for _, p := range tp.Partitions {
			s = append(s, fmt.Sprintf("%s-%d", tp.Topic, p))
		}
	}
	if len(s) == 0 {
		return "-"
	}
	return strings.Join(s, ",")
}

// describeTopics describes the named topics (every topic, internal ones too, when none is
// named), sorted by name, with an error naming each topic that could not be described.
func describeTopics(ctx context.Context, adm *admin, names ...string) ([]kadm.TopicDetail, error) {
	details, err := adm.ListTopicsWithInternal(ctx, names...)
	if err != nil {
		return nil, err
	}
	var errs []error
	out := details.Sorted()
	for _, d := range out {
		if d.Err != nil {
			errs = append(errs, fmt.Errorf("topic %s: %w", d.Topic, d.Err))
		}
	}
	return out, errors.Join(errs...)
}

// offsetsOf picks, from a kadm List*Offsets answer, the offsets of topic's partitions in
// parts (every partition when nil), keyed by partition; a partition that failed fails it.
func offsetsOf(topic string, parts []int32) func(kadm.ListedOffsets, error) (map[int32]int64, error) {
	return func(listed kadm.ListedOffsets, err error) (map[int32]int64, error) {
		if err != nil {
			return nil, fmt.Errorf("list offsets: %w", err)
		}
		out := map[int32]int64{}
		for p, lo := range listed[topic] {
			if len(parts) > 0 && !slices.Contains(parts, p) {
				continue
			}
			if lo.Err != nil {
				return nil, fmt.Errorf("list offsets: %s[%d]: %w", topic, p, lo.Err)
			}
			out[p] = lo.Offset
		}
		return out, nil
	}
}

// alterGroupConfig sets a group config (KIP-848 and KIP-932 group configs such as
// share.auto.offset.reset) with IncrementalAlterConfigs, which kadm offers only for topics
// and brokers.
func alterGroupConfig(ctx context.Context, cl *kgo.Client, group, name, value string) error {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	rc := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	rc.Name, rc.Op, rc.Value = name, kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr(value)
	rr.Configs = append(rr.Configs, rc)
	req.Resources = append(req.Resources, rr)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	for _, r := range resp.Resources {
		if err := codeErr(r.ErrorCode, r.ErrorMessage); err != nil {
			return err
		}
	}
	return nil
}
