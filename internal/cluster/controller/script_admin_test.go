package controller

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/exactq/exactq/internal/cluster/metadata"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// adminRequest builds the request of an admin script command (TestScripts' list); ok
// is false for another command.
func (s *script) adminRequest(t *testing.T, d *datadriven.TestData) (req any, ok bool) {
	validate := d.HasArg("validate")
	str := func(key string) string {
		var v string
		d.ScanArgs(t, key, &v)
		return v
	}
	lines := func() [][]string {
		var out [][]string
		for line := range strings.Lines(strings.TrimSpace(d.Input)) {
			if f := strings.Fields(line); len(f) > 0 {
				out = append(out, f)
			}
		}
		return out
	}
	resource := func() (kmsg.ConfigResourceType, string) {
		if d.HasArg("group") {
			return kmsg.ConfigResourceTypeGroupConfig, str("group")
		}
		return kmsg.ConfigResourceTypeTopic, str("topic")
	}
	switch d.Cmd {
	case "create":
		r := createTopics(validate)
		for _, f := range lines() {
			rt := newTopic(f[0], -1)
			for _, kv := range f[1:] {
				k, v, _ := strings.Cut(kv, "=")
				switch k {
				case "p":
					rt.NumPartitions = int32(atoi(t, d, v))
				case "rf":
					rt.ReplicationFactor = int16(atoi(t, d, v))
				default:
					c := kmsg.NewCreateTopicsRequestTopicConfig()
					c.Name, c.Value = k, &v
					rt.Configs = append(rt.Configs, c)
				}
			}
			r.Topics = append(r.Topics, rt)
		}
		return r, true
	case "delete":
		var names []string
		for _, f := range lines() {
			names = append(names, f[0])
		}
		return deleteTopics(names...), true
	case "grow":
		return createPartitions(validate, str("name"), int32(intArg(t, d, "count", 0))), true
	case "alter":
		rt, name := resource()
		r := kmsg.NewPtrAlterConfigsRequest()
		r.Version, r.ValidateOnly = 2, validate
		res := kmsg.NewAlterConfigsRequestResource()
		res.ResourceType, res.ResourceName = rt, name
		for _, f := range lines() {
			k, v, _ := strings.Cut(f[0], "=")
			c := kmsg.NewAlterConfigsRequestResourceConfig()
			c.Name, c.Value = k, &v
			res.Configs = append(res.Configs, c)
		}
		r.Resources = append(r.Resources, res)
		return r, true
	case "incremental":
		rt, name := resource()
		r := kmsg.NewPtrIncrementalAlterConfigsRequest()
		r.Version, r.ValidateOnly = 1, validate
		res := kmsg.NewIncrementalAlterConfigsRequestResource()
		res.ResourceType, res.ResourceName = rt, name
		for _, f := range lines() {
			c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
			switch f[0] {
			case "set":
				k, v, _ := strings.Cut(f[1], "=")
				c.Name, c.Op, c.Value = k, kmsg.IncrementalAlterConfigOpSet, &v
			case "delete":
				c.Name, c.Op = f[1], kmsg.IncrementalAlterConfigOpDelete
			default:
				t.Fatalf("%s: operation %q", d.Pos, f[0])
			}
			res.Configs = append(res.Configs, c)
		}
		r.Resources = append(r.Resources, res)
		return r, true
	case "feature":
		return updateFeature(validate, str("name"), int16(intArg(t, d, "level", 0))), true
	case "autocreate":
		return &AutoCreateTopicRequest{Name: str("name")}, true
	case "internal":
		return &CreateInternalTopicRequest{Name: str("name"), Partitions: int32(intArg(t, d, "partitions", 1))}, true
	}
	return nil, false
}

func atoi(t *testing.T, d *datadriven.TestData, v string) int {
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("%s: %q: %v", d.Pos, v, err)
	}
	return n
}

// resourceName prints a config resource: "topic a", "group g".
func resourceName(typ int8, name string) string {
	switch typ {
	case metadata.ResourceTopic:
		return "topic " + name
	case metadata.ResourceGroup:
		return "group " + name
	}
	return fmt.Sprintf("resource(%d) %s", typ, name)
}

// formatAdminResponse prints an admin response, a line per topic or resource: its code
// (NONE) and message.
func formatAdminResponse(resp kmsg.Response) (string, bool) {
	var sb strings.Builder
	line := func(what string, code int16, msg *string, extra string) {
		name := "NONE"
		if code != 0 {
			name = kerr.ErrorForCode(code).(*kerr.Error).Message
		}
		fmt.Fprintf(&sb, "%s: %s", what, name)
		sb.WriteString(extra)
		if msg != nil && *msg != "" {
			fmt.Fprintf(&sb, " %q", *msg)
		}
		sb.WriteString("\n")
	}
	switch r := resp.(type) {
	case *kmsg.CreateTopicsResponse:
		for _, tp := range r.Topics {
			extra := ""
			if tp.ErrorCode == 0 {
				extra = fmt.Sprintf(" id=%d partitions=%d rf=%d", tp.TopicID[15], tp.NumPartitions, tp.ReplicationFactor)
			}
			line("CreateTopics "+tp.Topic, tp.ErrorCode, tp.ErrorMessage, extra)
		}
	case *kmsg.DeleteTopicsResponse:
		for _, tp := range r.Topics {
			name := "?"
			if tp.Topic != nil {
				name = *tp.Topic
			}
			line("DeleteTopics "+name, tp.ErrorCode, tp.ErrorMessage, "")
		}
	case *kmsg.CreatePartitionsResponse:
		for _, tp := range r.Topics {
			line("CreatePartitions "+tp.Topic, tp.ErrorCode, tp.ErrorMessage, "")
		}
	case *kmsg.AlterConfigsResponse:
		for _, res := range r.Resources {
			line("AlterConfigs "+resourceName(int8(res.ResourceType), res.ResourceName), res.ErrorCode, res.ErrorMessage, "")
		}
	case *kmsg.IncrementalAlterConfigsResponse:
		for _, res := range r.Resources {
			line("IncrementalAlterConfigs "+resourceName(int8(res.ResourceType), res.ResourceName), res.ErrorCode, res.ErrorMessage, "")
		}
	case *kmsg.UpdateFeaturesResponse:
		line("UpdateFeatures", r.ErrorCode, r.ErrorMessage, "")
	default:
		return "", false
	}
	return sb.String(), true
}
