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

	"github.com/exactq/exactq/client"
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

func newAdmin(f *cmdFlags) (*client.Admin, error) {
	return client.NewAdmin(client.AdminConfig{Brokers: f.brokerList(), Net: netConfig()})
}

// parseAdmin parses args as parse does and connects an admin client to the -b brokers, for
// the commands that take nothing but positional arguments; the caller closes it.
func (f *cmdFlags) parseAdmin(args []string, minArgs, maxArgs int) ([]string, *client.Admin, error) {
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
	nt := client.NewTopic{Name: pos[0], Partitions: int32(partitions), ReplicationFactor: int16(replication), Configs: map[string]string{}}
	for _, kv := range kvs {
		nt.Configs[kv[0]] = kv[1]
	}
	adm, err := newAdmin(f)
	if err != nil {
		return err
	}
	defer adm.Close()
	if _, err := adm.CreateTopics(ctx, *validateOnly, nt); err != nil {
		return err
	}
	if *validateOnly {
		fmt.Fprintf(stdout, "Topic %s can be created (validate only, nothing created).\n", nt.Name)
	} else {
		fmt.Fprintf(stdout, "Created topic %s.\n", nt.Name)
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
	names, err := adm.ListTopics(ctx)
	if err != nil {
		return err
	}
	for _, n := range names {
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
	details, err := adm.DescribeTopics(ctx, names...)
	if err != nil {
		return topicErr(err)
	}
	resources := make([]client.ConfigResource, len(details))
	for i, d := range details {
		resources[i] = client.ConfigResource{Type: client.TopicResource, Name: d.Name}
	}
	configs := map[string][]client.ConfigEntry{}
	if len(resources) > 0 {
		rcs, err := adm.DescribeConfigs(ctx, resources...)
		if err != nil {
			return topicErr(err)
		}
		for _, rc := range rcs {
			configs[rc.Resource.Name] = rc.Configs
		}
	}
	for _, d := range details {
		writeTopicDetail(stdout, d, configs[d.Name], *allConfigs)
	}
	return nil
}

// writeTopicDetail prints one topic in kafka-topics.sh --describe's layout, plus every
// config with its source when all is set.
func writeTopicDetail(w io.Writer, d client.TopicDetail, configs []client.ConfigEntry, all bool) {
	sort.Slice(configs, func(i, j int) bool { return configs[i].Name < configs[j].Name })
	var overrides []string
	for _, c := range configs {
		if !c.IsDefault {
			overrides = append(overrides, c.Name+"="+configValue(c))
		}
	}
	rf := 0
	if len(d.Partitions) > 0 {
		rf = len(d.Partitions[0].Replicas)
	}
	fmt.Fprintf(w, "Topic: %s\tTopicId: %s\tPartitionCount: %d\tReplicationFactor: %d\tConfigs: %s\n",
		d.Name, topicID(d.ID), len(d.Partitions), rf, strings.Join(overrides, ","))
	parts := append([]client.PartitionDetail(nil), d.Partitions...)
	sort.Slice(parts, func(i, j int) bool { return parts[i].Partition < parts[j].Partition })
	for _, p := range parts {
		fmt.Fprintf(w, "\tTopic: %s\tPartition: %d\tLeader: %s\tReplicas: %s\tIsr: %s",
			d.Name, p.Partition, nodeID(p.Leader), nodeList(p.Replicas), nodeList(p.ISR))
		if len(p.Offline) > 0 {
			fmt.Fprintf(w, "\tOffline: %s", nodeList(p.Offline))
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

func configValue(c client.ConfigEntry) string {
	switch {
	case c.Sensitive:
		return "(sensitive)"
	case c.Value == nil:
		return "(null)"
	}
	return *c.Value
}

func configSource(c client.ConfigEntry) string {
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
	for _, r := range results {
		if r.Err == nil {
			fmt.Fprintf(stdout, "Deleted topic %s.\n", r.Topic)
		}
	}
	return topicErr(err)
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
	var changes []client.AlterConfig
	for _, kv := range kvs {
		changes = append(changes, client.AlterConfig{Name: kv[0], Op: client.OpSet, Value: kv[1]})
	}
	for _, k := range deletes {
		changes = append(changes, client.AlterConfig{Name: k, Op: client.OpDelete})
	}
	adm, err := newAdmin(f)
	if err != nil {
		return err
	}
	defer adm.Close()
	res := client.ConfigResource{Type: client.TopicResource, Name: pos[0]}
	if _, err := adm.IncrementalAlterConfigs(ctx, *validateOnly, map[client.ConfigResource][]client.AlterConfig{res: changes}); err != nil {
		return topicErr(err)
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
