package client

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// AdminConfig configures an Admin client.
type AdminConfig struct {
	Brokers []string
	Net     NetConfig
	// Timeout is the broker-side timeout of topic operations. Default 30s.
	Timeout time.Duration
}

// Admin manages topics, configs and offsets. It is safe for concurrent use.
//
// Every method returns per-item results and, as its error, errors.Join of the per-item
// errors (each wrapping a kerr value and naming the item) or a request-level error, so
// errors.Is(err, kerr.TopicAlreadyExists) works on the returned error directly.
type Admin struct {
	cl      *cluster
	timeout time.Duration
}

// NewAdmin validates cfg; it connects on the first request.
func NewAdmin(cfg AdminConfig) (*Admin, error) {
	nc, err := newNetConfig(cfg.Brokers, cfg.Net)
	if err != nil {
		return nil, err
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	return &Admin{cl: newCluster(nc), timeout: cfg.Timeout}, nil
}

// Close closes the connections.
func (a *Admin) Close() { a.cl.close() }

func (a *Admin) timeoutMillis() int32 { return int32(a.timeout.Milliseconds()) }

// NewTopic describes a topic to create. Partitions and ReplicationFactor of -1 (or 0) use
// the broker defaults.
type NewTopic struct {
	Name              string
	Partitions        int32
	ReplicationFactor int16
	Configs           map[string]string
}

// TopicResult is one topic's outcome.
type TopicResult struct {
	Topic string
	ID    [16]byte
	Err   error
}

// controllerAttempts bounds retries after NOT_CONTROLLER.
const controllerAttempts = 3

// toController sends req to the controller, refreshing metadata and retrying while the
// answer says NOT_CONTROLLER.
func (a *Admin) toController(ctx context.Context, req kmsg.Request, notController func(kmsg.Response) bool) (kmsg.Response, error) {
	var resp kmsg.Response
	var err error
	for i := 0; i < controllerAttempts; i++ {
		resp, err = a.cl.do(ctx, controllerBroker(), req)
		if err != nil || !notController(resp) {
			return resp, err
		}
		if _, err := a.cl.refreshMetadata(ctx, nil); err != nil {
			return nil, err
		}
	}
	return resp, err
}

func joinTopicErrs(rs []TopicResult) error {
	var errs []error
	for _, r := range rs {
		if r.Err != nil {
			errs = append(errs, fmt.Errorf("topic %s: %w", r.Topic, r.Err))
		}
	}
	return errors.Join(errs...)
}

// BrokerError is a Kafka error code that came with the broker's own message. It prints as
// "CODE: message" (the message replaces kerr's generic description of the code) and
// unwraps to the kerr value, so errors.Is(err, kerr.TopicAlreadyExists) holds.
type BrokerError struct {
	Err     *kerr.Error
	Message string
}

func (e *BrokerError) Error() string { return e.Err.Message + ": " + e.Message }
func (e *BrokerError) Unwrap() error { return e.Err }

// kerrWithMessage is the error for code: nil for 0, a BrokerError when the broker sent a
// message, else the kerr value.
func kerrWithMessage(code int16, msg *string) error {
	ke := kerr.TypedErrorForCode(code)
	if ke == nil {
		return nil
	}
	if msg != nil && *msg != "" {
		return &BrokerError{Err: ke, Message: *msg}
	}
	return ke
}

// CreateTopics creates topics (or, with validateOnly, only checks they could be).
func (a *Admin) CreateTopics(ctx context.Context, validateOnly bool, topics ...NewTopic) ([]TopicResult, error) {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = a.timeoutMillis()
	req.ValidateOnly = validateOnly
	for _, t := range topics {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic = t.Name
		rt.NumPartitions, rt.ReplicationFactor = t.Partitions, t.ReplicationFactor
		if rt.NumPartitions == 0 {
			rt.NumPartitions = -1
		}
		if rt.ReplicationFactor == 0 {
			rt.ReplicationFactor = -1
		}
		for _, k := range sortedKeys(t.Configs) {
			c := kmsg.NewCreateTopicsRequestTopicConfig()
			c.Name, c.Value = k, kmsg.StringPtr(t.Configs[k])
			rt.Configs = append(rt.Configs, c)
		}
		req.Topics = append(req.Topics, rt)
	}
	resp, err := a.toController(ctx, req, func(r kmsg.Response) bool {
		for _, t := range r.(*kmsg.CreateTopicsResponse).Topics {
			if t.ErrorCode == kerr.NotController.Code {
				return true
			}
		}
		return false
	})
	if err != nil {
		return nil, err
	}
	var out []TopicResult
	for _, t := range resp.(*kmsg.CreateTopicsResponse).Topics {
		out = append(out, TopicResult{Topic: t.Topic, ID: t.TopicID, Err: kerrWithMessage(t.ErrorCode, t.ErrorMessage)})
	}
	return out, joinTopicErrs(out)
}

// DeleteTopics deletes topics by name.
func (a *Admin) DeleteTopics(ctx context.Context, topics ...string) ([]TopicResult, error) {
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.TimeoutMillis = a.timeoutMillis()
	req.TopicNames = topics // v0-v5
	for _, t := range topics {
		rt := kmsg.NewDeleteTopicsRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt) // v6+
	}
	resp, err := a.toController(ctx, req, func(r kmsg.Response) bool {
		for _, t := range r.(*kmsg.DeleteTopicsResponse).Topics {
			if t.ErrorCode == kerr.NotController.Code {
				return true
			}
		}
		return false
	})
	if err != nil {
		return nil, err
	}
	var out []TopicResult
	for _, t := range resp.(*kmsg.DeleteTopicsResponse).Topics {
		name := ""
		if t.Topic != nil {
			name = *t.Topic
		}
		out = append(out, TopicResult{Topic: name, ID: t.TopicID, Err: kerrWithMessage(t.ErrorCode, t.ErrorMessage)})
		if t.ErrorCode == 0 {
			a.cl.forget(name)
		}
	}
	return out, joinTopicErrs(out)
}

// CreatePartitions raises topics' partition counts to the given totals.
func (a *Admin) CreatePartitions(ctx context.Context, validateOnly bool, totals map[string]int32) ([]TopicResult, error) {
	req := kmsg.NewPtrCreatePartitionsRequest()
	req.TimeoutMillis = a.timeoutMillis()
	req.ValidateOnly = validateOnly
	for _, name := range sortedKeys(totals) {
		rt := kmsg.NewCreatePartitionsRequestTopic()
		rt.Topic, rt.Count = name, totals[name]
		req.Topics = append(req.Topics, rt)
	}
	resp, err := a.toController(ctx, req, func(r kmsg.Response) bool {
		for _, t := range r.(*kmsg.CreatePartitionsResponse).Topics {
			if t.ErrorCode == kerr.NotController.Code {
				return true
			}
		}
		return false
	})
	if err != nil {
		return nil, err
	}
	var out []TopicResult
	for _, t := range resp.(*kmsg.CreatePartitionsResponse).Topics {
		out = append(out, TopicResult{Topic: t.Topic, Err: kerrWithMessage(t.ErrorCode, t.ErrorMessage)})
	}
	return out, joinTopicErrs(out)
}

// TopicDetail is one topic as Metadata describes it.
type TopicDetail struct {
	Name       string
	ID         [16]byte
	Internal   bool
	Partitions []PartitionDetail
	Err        error
}

// PartitionDetail is one partition of a TopicDetail.
type PartitionDetail struct {
	Partition   int32
	Leader      int32
	LeaderEpoch int32
	Replicas    []int32
	ISR         []int32
	Offline     []int32
	Err         error
}

// ListTopics returns the names of every topic, sorted.
func (a *Admin) ListTopics(ctx context.Context) ([]string, error) {
	resp, err := a.cl.metadata(ctx, nil, true)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, t := range resp.Topics {
		if t.Topic != nil && t.ErrorCode == 0 {
			out = append(out, *t.Topic)
		}
	}
	sort.Strings(out)
	return out, nil
}

// DescribeTopics describes the named topics (all topics when none are named).
func (a *Admin) DescribeTopics(ctx context.Context, topics ...string) ([]TopicDetail, error) {
	resp, err := a.cl.metadata(ctx, topics, len(topics) == 0)
	if err != nil {
		return nil, err
	}
	var out []TopicDetail
	var errs []error
	for i := range resp.Topics {
		t := &resp.Topics[i]
		if t.Topic == nil {
			continue
		}
		tm := topicFromMetadata(t)
		d := TopicDetail{Name: tm.name, ID: tm.id, Internal: tm.internal, Err: tm.err}
		for _, p := range tm.partitions {
			d.Partitions = append(d.Partitions, PartitionDetail{
				Partition: p.id, Leader: p.leader, LeaderEpoch: p.leaderEpoch,
				Replicas: p.replicas, ISR: p.isr, Offline: p.offline, Err: p.err,
			})
		}
		if d.Err != nil {
			errs = append(errs, fmt.Errorf("topic %s: %w", d.Name, d.Err))
		}
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, errors.Join(errs...)
}

// ResourceType is a config resource type.
type ResourceType int8

const (
	TopicResource  = ResourceType(kmsg.ConfigResourceTypeTopic)
	BrokerResource = ResourceType(kmsg.ConfigResourceTypeBroker)
	// GroupResource is a consumer or share group's dynamic configs (KIP-848, KIP-932:
	// share.auto.offset.reset, share.record.lock.duration.ms, ...).
	GroupResource = ResourceType(32)
)

// ConfigResource names a topic or a broker (by id, as a string).
type ConfigResource struct {
	Type ResourceType
	Name string
}

// ConfigEntry is one described config.
type ConfigEntry struct {
	Name      string
	Value     *string // nil for sensitive or unset values
	ReadOnly  bool
	IsDefault bool
	Sensitive bool
	Source    kmsg.ConfigSource
}

// ResourceConfigs is one resource's configs.
type ResourceConfigs struct {
	Resource ConfigResource
	Configs  []ConfigEntry
	Err      error
}

// DescribeConfigs describes every config of each resource. Broker resources go to that
// broker; topic resources to any broker.
func (a *Admin) DescribeConfigs(ctx context.Context, resources ...ConfigResource) ([]ResourceConfigs, error) {
	var out []ResourceConfigs
	var errs []error
	for t, rs := range a.routeResources(resources) {
		req := kmsg.NewPtrDescribeConfigsRequest()
		for _, r := range rs {
			rr := kmsg.NewDescribeConfigsRequestResource()
			rr.ResourceType, rr.ResourceName, rr.ConfigNames = kmsg.ConfigResourceType(r.Type), r.Name, nil
			req.Resources = append(req.Resources, rr)
		}
		resp, err := a.cl.do(ctx, t, req)
		if err != nil {
			return nil, err
		}
		for _, rr := range resp.(*kmsg.DescribeConfigsResponse).Resources {
			rc := ResourceConfigs{Resource: ConfigResource{ResourceType(rr.ResourceType), rr.ResourceName}, Err: kerrWithMessage(rr.ErrorCode, rr.ErrorMessage)}
			for _, c := range rr.Configs {
				rc.Configs = append(rc.Configs, ConfigEntry{
					Name: c.Name, Value: c.Value, ReadOnly: c.ReadOnly, Sensitive: c.IsSensitive,
					IsDefault: c.IsDefault || c.Source == kmsg.ConfigSourceDefaultConfig, Source: c.Source,
				})
			}
			if rc.Err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", rc.Resource.Name, rc.Err))
			}
			out = append(out, rc)
		}
	}
	return out, errors.Join(errs...)
}

// routeResources groups resources by the broker that must answer for them: a broker
// resource with a numeric name goes to that broker, everything else to any broker.
func (a *Admin) routeResources(resources []ConfigResource) map[target][]ConfigResource {
	out := make(map[target][]ConfigResource)
	for _, r := range resources {
		t := anyBroker()
		if r.Type == BrokerResource && r.Name != "" {
			var id int32
			if _, err := fmt.Sscan(r.Name, &id); err == nil {
				t = broker(id)
				if !a.cl.brokerKnown(id) {
					t = anyBroker()
				}
			}
		}
		out[t] = append(out[t], r)
	}
	return out
}

// AlterOp is an incremental config operation.
type AlterOp int8

const (
	OpSet      = AlterOp(kmsg.IncrementalAlterConfigOpSet)
	OpDelete   = AlterOp(kmsg.IncrementalAlterConfigOpDelete)
	OpAppend   = AlterOp(kmsg.IncrementalAlterConfigOpAppend)
	OpSubtract = AlterOp(kmsg.IncrementalAlterConfigOpSubtract)
)

// AlterConfig is one incremental change.
type AlterConfig struct {
	Name  string
	Op    AlterOp
	Value string // ignored for OpDelete
}

// IncrementalAlterConfigs applies changes per resource; the result maps each resource to
// its error (nil on success).
func (a *Admin) IncrementalAlterConfigs(ctx context.Context, validateOnly bool, changes map[ConfigResource][]AlterConfig) (map[ConfigResource]error, error) {
	resources := make([]ConfigResource, 0, len(changes))
	for r := range changes {
		resources = append(resources, r)
	}
	out := make(map[ConfigResource]error)
	var errs []error
	for t, rs := range a.routeResources(resources) {
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		req.ValidateOnly = validateOnly
		for _, r := range rs {
			rr := kmsg.NewIncrementalAlterConfigsRequestResource()
			rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceType(r.Type), r.Name
			for _, c := range changes[r] {
				rc := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
				rc.Name, rc.Op = c.Name, kmsg.IncrementalAlterConfigOp(c.Op)
				if c.Op != OpDelete {
					rc.Value = kmsg.StringPtr(c.Value)
				}
				rr.Configs = append(rr.Configs, rc)
			}
			req.Resources = append(req.Resources, rr)
		}
		resp, err := a.cl.do(ctx, t, req)
		if err != nil {
			return nil, err
		}
		for _, rr := range resp.(*kmsg.IncrementalAlterConfigsResponse).Resources {
			res := ConfigResource{ResourceType(rr.ResourceType), rr.ResourceName}
			err := kerrWithMessage(rr.ErrorCode, rr.ErrorMessage)
			out[res] = err
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", rr.ResourceName, err))
			}
		}
	}
	return out, errors.Join(errs...)
}

// ListOffsets looks up offsets: specs maps each partition to Earliest (-2), Latest (-1)
// or a timestamp in milliseconds (the first offset whose timestamp is at or after it).
func (a *Admin) ListOffsets(ctx context.Context, iso IsolationLevel, specs map[TopicPartition]int64) (map[TopicPartition]ListedOffset, error) {
	out, err := listOffsets(ctx, a.cl, iso, specs)
	if err != nil {
		return nil, err
	}
	return out, firstErr(out, func(l ListedOffset) error { return l.Err })
}

// DeleteRecordsResult is one partition's DeleteRecords outcome.
type DeleteRecordsResult struct {
	LowWatermark int64
	Err          error
}

// DeleteRecords deletes every record before the given offset per partition (-1: up to
// the high watermark).
func (a *Admin) DeleteRecords(ctx context.Context, before map[TopicPartition]int64) (map[TopicPartition]DeleteRecordsResult, error) {
	out := make(map[TopicPartition]DeleteRecordsResult, len(before))
	missing := make(map[TopicPartition]ListedOffset)
	byLeader, err := groupByLeader(ctx, a.cl, keys(before), missing)
	if err != nil {
		return nil, err
	}
	for tp, m := range missing {
		out[tp] = DeleteRecordsResult{LowWatermark: -1, Err: m.Err}
	}
	for leader, tps := range byLeader {
		req := kmsg.NewPtrDeleteRecordsRequest()
		req.TimeoutMillis = a.timeoutMillis()
		idx := map[string]int{}
		for _, tp := range tps {
			i, ok := idx[tp.Topic]
			if !ok {
				i = len(req.Topics)
				idx[tp.Topic] = i
				t := kmsg.NewDeleteRecordsRequestTopic()
				t.Topic = tp.Topic
				req.Topics = append(req.Topics, t)
			}
			p := kmsg.NewDeleteRecordsRequestTopicPartition()
			p.Partition, p.Offset = tp.Partition, before[tp]
			req.Topics[i].Partitions = append(req.Topics[i].Partitions, p)
		}
		resp, err := a.cl.do(ctx, broker(leader), req)
		if err != nil {
			for _, tp := range tps {
				out[tp] = DeleteRecordsResult{LowWatermark: -1, Err: err}
			}
			continue
		}
		for _, t := range resp.(*kmsg.DeleteRecordsResponse).Topics {
			for _, p := range t.Partitions {
				out[TopicPartition{t.Topic, p.Partition}] = DeleteRecordsResult{LowWatermark: p.LowWatermark, Err: kerr.ErrorForCode(p.ErrorCode)}
			}
		}
	}
	return out, firstErr(out, func(r DeleteRecordsResult) error { return r.Err })
}

// ClusterInfo describes the cluster.
type ClusterInfo struct {
	ClusterID    string
	ControllerID int32
	Brokers      []BrokerInfo
}

// DescribeCluster uses DescribeCluster where the broker has it and Metadata otherwise.
func (a *Admin) DescribeCluster(ctx context.Context) (ClusterInfo, error) {
	c, err := a.cl.anyConn(ctx)
	if err != nil {
		return ClusterInfo{}, err
	}
	if c.version(kmsg.DescribeCluster.Int16()) >= 0 {
		resp, err := a.cl.doOn(ctx, c, kmsg.NewPtrDescribeClusterRequest())
		if err != nil {
			return ClusterInfo{}, err
		}
		r := resp.(*kmsg.DescribeClusterResponse)
		if err := kerrWithMessage(r.ErrorCode, r.ErrorMessage); err != nil {
			return ClusterInfo{}, err
		}
		info := ClusterInfo{ClusterID: r.ClusterID, ControllerID: r.ControllerID}
		for _, b := range r.Brokers {
			bi := BrokerInfo{NodeID: b.NodeID, Host: b.Host, Port: b.Port}
			if b.Rack != nil {
				bi.Rack = *b.Rack
			}
			info.Brokers = append(info.Brokers, bi)
		}
		sort.Slice(info.Brokers, func(i, j int) bool { return info.Brokers[i].NodeID < info.Brokers[j].NodeID })
		return info, nil
	}
	resp, err := a.cl.refreshMetadata(ctx, nil)
	if err != nil {
		return ClusterInfo{}, err
	}
	info := ClusterInfo{ControllerID: resp.ControllerID}
	if resp.ClusterID != nil {
		info.ClusterID = *resp.ClusterID
	}
	for _, b := range resp.Brokers {
		bi := BrokerInfo{NodeID: b.NodeID, Host: b.Host, Port: b.Port}
		if b.Rack != nil {
			bi.Rack = *b.Rack
		}
		info.Brokers = append(info.Brokers, bi)
	}
	sort.Slice(info.Brokers, func(i, j int) bool { return info.Brokers[i].NodeID < info.Brokers[j].NodeID })
	return info, nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
