package main

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const topicUsage = `Usage:
  exactq topic create NAME [-p partitions] [-r replication] [-c key=value ...] [--validate-only]
  exactq topic list
  exactq topic describe [NAME...] [--all-configs]
  exactq topic delete NAME...
  exactq topic alter NAME [-c key=value ...] [--delete-config key ...] [--validate-only]

Flags (every subcommand):
  -b, --brokers host:port[,...]   bootstrap brokers (default 127.0.0.1:9092)
`

// topicCommands are the subcommands of "exactq topic".
var topicCommands = []subcommand{
	{"create", quiet(topicCreate)}, {"list", quiet(topicList)}, {"describe", quiet(topicDescribe)},
	{"delete", quiet(topicDelete)}, {"alter", quiet(topicAlter)},
}

// runTopic runs "exactq topic SUBCOMMAND ...".
func runTopic(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	return dispatch(ctx, "topic", topicUsage, topicCommands, args, stdout, stderr)
}

func topicCreate(ctx context.Context, args []string, stdout io.Writer) error {
	f := newCmdFlags("topic create", `Usage: exactq topic create NAME [flags]

  -p, --partitions N        partition count (default: the broker's num.partitions)
  -r, --replication N       replication factor (default: the broker's default)
  -c, --config key=value    topic config, repeatable
      --validate-only       only check that the topic could be created
  -b, --brokers host:port   bootstrap brokers (default 127.0.0.1:9092)
`, stdout)
	var partitions, replication int
	var configs listFlag
	f.IntVarP(&partitions, "partitions", "p", -1, "")
	f.IntVarP(&replication, "replication", "r", -1, "")
	f.VarP(&configs, "config", "c", "")
	validateOnly := f.Bool("validate-only", false, "")
	pos, err := f.parse(args, 1, 1)
	if err != nil {
		return err
	}
	if partitions == 0 || partitions < -1 || partitions > 1<<31-1 {
		return usagef("-p %d: want a positive partition count", partitions)
	}
	if replication == 0 || replication < -1 || replication > 1<<15-1 {
		return usagef("-r %d: want a positive replication factor", replication)
	}
	kvs, err := keyValues("-c", configs)
	if err != nil {
		return err
	}
	name := pos[0]
	topicConfigs := map[string]*string{}
	for _, kv := range kvs {
		topicConfigs[kv[0]] = kmsg.StringPtr(kv[1])
	}
	adm, err := newAdmin(f)
	if err != nil {
		return err
	}
	defer adm.Close()
	create := adm.CreateTopics
	if *validateOnly {
		create = adm.ValidateCreateTopics
	}
	results, err := create(ctx, int32(partitions), int16(replication), topicConfigs, name)
	if err != nil {
		return err
	}
	if r := results[name]; r.Err != nil {
		return fmt.Errorf("topic %s: %w", name, withMessage(r.Err, r.ErrMessage))
	}
	if *validateOnly {
		fmt.Fprintf(stdout, "Topic %s can be created (validate only, nothing created).\n", name)
	} else {
		fmt.Fprintf(stdout, "Created topic %s.\n", name)
	}
	return nil
}

func topicList(ctx context.Context, args []string, stdout io.Writer) error {
	f := newCmdFlags("topic list", "Usage: exactq topic list [-b, --brokers host:port]\n\nPrints every topic name, one a line, sorted.\n", stdout)
	_, adm, err := f.parseAdmin(args, 0, 0)
	if err != nil {
		return err
	}
	defer adm.Close()
	details, err := adm.ListTopicsWithInternal(ctx)
	if err != nil {
		return err
	}
	for _, n := range details.Names() {
		fmt.Fprintln(stdout, n)
	}
	return nil
}

func topicDescribe(ctx context.Context, args []string, stdout io.Writer) error {
	f := newCmdFlags("topic describe", `Usage: exactq topic describe [NAME...] [flags]

Describes the named topics (every topic when none is named): id, partitions with leader,
replicas and in-sync replicas, and the configs that are not defaults.

      --all-configs         list every config with its source
  -b, --brokers host:port   bootstrap brokers (default 127.0.0.1:9092)
`, stdout)
	allConfigs := f.Bool("all-configs", false, "")
	names, adm, err := f.parseAdmin(args, 0, -1)
	if err != nil {
		return err
	}
	defer adm.Close()
	details, err := describeTopics(ctx, adm, names...)
	if err != nil {
		return topicErr(err)
	}
	topics := make([]string, len(details))
	for i, d := range details {
		topics[i] = d.Topic
	}
	configs, err := describeTopicConfigs(ctx, adm, topics)
	if err != nil {
		return topicErr(err)
	}
	for _, d := range details {
		writeTopicDetail(stdout, d, configs[d.Topic], *allConfigs)
	}
	return nil
}

// describeTopicConfigs describes the topics' configs with a DescribeConfigs request of its
// own: kadm's configs lack the read-only flag --all-configs prints.
func describeTopicConfigs(ctx context.Context, adm *admin, topics []string) (map[string][]kmsg.DescribeConfigsResponseResourceConfig, error) {
	out := map[string][]kmsg.DescribeConfigsResponseResourceConfig{}
	if len(topics) == 0 {
		return out, nil
	}
	req := kmsg.NewPtrDescribeConfigsRequest()
	for _, t := range topics {
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, t
		req.Resources = append(req.Resources, rr)
	}
	resp, err := req.RequestWith(ctx, adm.kgo)
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, rr := range resp.Resources {
		if err := codeErr(rr.ErrorCode, rr.ErrorMessage); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", rr.ResourceName, err))
			continue
		}
		out[rr.ResourceName] = rr.Configs
	}
	return out, errors.Join(errs...)
}

// writeTopicDetail prints one topic in kafka-topics.sh --describe's layout, plus every
// config with its source when all is set.
func writeTopicDetail(w io.Writer, d kadm.TopicDetail, configs []kmsg.DescribeConfigsResponseResourceConfig, all bool) {
	sort.Slice(configs, func(i, j int) bool { return configs[i].Name < configs[j].Name })
	var overrides []string
	for _, c := range configs {
		if !isDefault(c) {
			overrides = append(overrides, c.Name+"="+configValue(c))
		}
	}
	parts := d.Partitions.Sorted()
	rf := 0
	if len(parts) > 0 {
		rf = len(parts[0].Replicas)
	}
	fmt.Fprintf(w, "Topic: %s\tTopicId: %s\tPartitionCount: %d\tReplicationFactor: %d\tConfigs: %s\n",
		d.Topic, topicID(d.ID), len(parts), rf, strings.Join(overrides, ","))
	for _, p := range parts {
		fmt.Fprintf(w, "\tTopic: %s\tPartition: %d\tLeader: %s\tReplicas: %s\tIsr: %s",
			d.Topic, p.Partition, nodeID(p.Leader), nodeList(p.Replicas), nodeList(p.ISR))
		if len(p.OfflineReplicas) > 0 {
			fmt.Fprintf(w, "\tOffline: %s", nodeList(p.OfflineReplicas))
		}
		if p.Err != nil {
			fmt.Fprintf(w, "\tError: %v", p.Err)
		}
		fmt.Fprintln(w)
	}
	if all {
		for _, c := range configs {
			fmt.Fprintf(w, "\tConfig: %s=%s\t(%s)\n", c.Name, configValue(c), configSource(c))
		}
	}
}

// topicID prints a topic id as Kafka's Uuid.toString does: URL-safe base64, no padding.
func topicID(id [16]byte) string { return base64.RawURLEncoding.EncodeToString(id[:]) }

func nodeID(id int32) string {
	if id < 0 {
		return "none"
	}
	return strconv.Itoa(int(id))
}

func nodeList(ids []int32) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.Itoa(int(id))
	}
	return strings.Join(s, ",")
}

// isDefault: the config has its default value (v0 responses say so, later ones name the
// source).
func isDefault(c kmsg.DescribeConfigsResponseResourceConfig) bool {
	return c.IsDefault || c.Source == kmsg.ConfigSourceDefaultConfig
}

func configValue(c kmsg.DescribeConfigsResponseResourceConfig) string {
	switch {
	case c.IsSensitive:
		return "(sensitive)"
	case c.Value == nil:
		return "(null)"
	}
	return *c.Value
}

func configSource(c kmsg.DescribeConfigsResponseResourceConfig) string {
	var s string
	switch c.Source {
	case kmsg.ConfigSourceDynamicTopicConfig:
		s = "topic"
	case kmsg.ConfigSourceDynamicBrokerConfig:
		s = "dynamic broker"
	case kmsg.ConfigSourceDynamicDefaultBrokerConfig:
		s = "dynamic default broker"
	case kmsg.ConfigSourceStaticBrokerConfig:
		s = "static broker"
	case kmsg.ConfigSourceDefaultConfig:
		s = "default"
	default:
		s = strings.ToLower(c.Source.String())
	}
	if c.ReadOnly {
		s += ", read-only"
	}
	return s
}

func topicDelete(ctx context.Context, args []string, stdout io.Writer) error {
	f := newCmdFlags("topic delete", "Usage: exactq topic delete NAME... [-b, --brokers host:port]\n", stdout)
	names, adm, err := f.parseAdmin(args, 1, -1)
	if err != nil {
		return err
	}
	defer adm.Close()
	results, err := adm.DeleteTopics(ctx, names...)
	if err != nil {
		return err
	}
	var errs []error
	for _, r := range results.Sorted() {
		if r.Err != nil {
			errs = append(errs, fmt.Errorf("topic %s: %w", r.Topic, withMessage(r.Err, r.ErrMessage)))
			continue
		}
		fmt.Fprintf(stdout, "Deleted topic %s.\n", r.Topic)
	}
	return topicErr(errors.Join(errs...))
}

func topicAlter(ctx context.Context, args []string, stdout io.Writer) error {
	f := newCmdFlags("topic alter", `Usage: exactq topic alter NAME [flags]

Changes topic configs with IncrementalAlterConfigs; configs not named keep their values.

  -c, --config key=value    set a config, repeatable
      --delete-config key   remove a topic override (back to the default), repeatable
      --validate-only       only check that the change is valid
  -b, --brokers host:port   bootstrap brokers (default 127.0.0.1:9092)
`, stdout)
	var sets, deletes listFlag
	f.VarP(&sets, "config", "c", "")
	f.Var(&deletes, "delete-config", "")
	validateOnly := f.Bool("validate-only", false, "")
	pos, err := f.parse(args, 1, 1)
	if err != nil {
		return err
	}
	kvs, err := keyValues("-c", sets)
	if err != nil {
		return err
	}
	if len(kvs)+len(deletes) == 0 {
		return usagef("nothing to alter: give -c key=value or --delete-config key")
	}
	var changes []kadm.AlterConfig
	for _, kv := range kvs {
		changes = append(changes, kadm.AlterConfig{Name: kv[0], Op: kadm.SetConfig, Value: kmsg.StringPtr(kv[1])})
	}
	for _, k := range deletes {
		changes = append(changes, kadm.AlterConfig{Name: k, Op: kadm.DeleteConfig})
	}
	adm, err := newAdmin(f)
	if err != nil {
		return err
	}
	defer adm.Close()
	alter := adm.AlterTopicConfigs
	if *validateOnly {
		alter = adm.ValidateAlterTopicConfigs
	}
	results, err := alter(ctx, changes, pos[0])
	if err != nil {
		return err
	}
	for _, r := range results {
		if r.Err != nil {
			return topicErr(fmt.Errorf("%s: %w", r.Name, withMessage(r.Err, r.ErrMessage)))
		}
	}
	if *validateOnly {
		fmt.Fprintf(stdout, "Configs of topic %s can be altered (validate only, nothing changed).\n", pos[0])
	} else {
		fmt.Fprintf(stdout, "Altered configs of topic %s.\n", pos[0])
	}
	return nil
}

// topicErr adds a plain-words hint to an unknown-topic error, keeping the kerr value for
// errors.Is.
func topicErr(err error) error {
	if errors.Is(err, kerr.UnknownTopicOrPartition) {
		return fmt.Errorf("no such topic: %w", err)
	}
	return err
}
