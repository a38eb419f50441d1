package client

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/exactq/exactq/internal/testbroker"
	"github.com/twmb/franz-go/pkg/kerr"
)

// A broker's error message replaces kerr's generic description instead of following it.
func TestIntegrationBrokerErrorMessage(t *testing.T) {
	b := testbroker.Start(t)
	a := newTestAdmin(t, b.Addr)
	createTopic(t, a, "demo", 1)
	_, err := a.CreateTopics(testCtx(t), false, NewTopic{Name: "demo"})
	if !errors.Is(err, kerr.TopicAlreadyExists) || kerr.IsRetriable(err) {
		t.Fatalf("create twice: %v, want TOPIC_ALREADY_EXISTS", err)
	}
	if want := "topic demo: TOPIC_ALREADY_EXISTS: Topic 'demo' already exists."; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
	var be *BrokerError
	if !errors.As(err, &be) || be.Message != "Topic 'demo' already exists." {
		t.Errorf("BrokerError: %+v", be)
	}
}

func TestKerrWithMessage(t *testing.T) {
	if err := kerrWithMessage(0, nil); err != nil {
		t.Errorf("code 0: %v", err)
	}
	if err := kerrWithMessage(kerr.InvalidConfig.Code, nil); err != error(kerr.InvalidConfig) {
		t.Errorf("no message: %v, want the kerr value itself", err)
	}
	empty := ""
	if err := kerrWithMessage(kerr.InvalidConfig.Code, &empty); err != error(kerr.InvalidConfig) {
		t.Errorf("empty message: %v", err)
	}
	msg := "retention.ms: not a number"
	err := kerrWithMessage(kerr.InvalidConfig.Code, &msg)
	if !errors.Is(err, kerr.InvalidConfig) || err.Error() != "INVALID_CONFIG: retention.ms: not a number" {
		t.Errorf("with message: %q", err)
	}
	if strings.Contains(err.Error(), kerr.InvalidConfig.Description) {
		t.Errorf("description repeated: %q", err)
	}
}

func TestIntegrationAdminGroups(t *testing.T) {
	b := testbroker.Start(t, testbroker.WithoutAutoCreate())
	a := newTestAdmin(t, b.Addr)
	createTopic(t, a, "gt", 2)
	ctx := testCtx(t)
	p := newTestProducer(t, b.Addr, nil)
	for i := range 10 {
		p.Produce(ctx, &Record{Topic: "gt", Partition: int32(i % 2), Value: []byte{byte(i)}}, nil)
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	c, err := NewConsumer(ConsumerConfig{Brokers: []string{b.Addr}, Net: NetConfig{ClientID: "admin-test"}, Group: "g1", DisableAutoCommit: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Subscribe("gt"); err != nil {
		t.Fatal(err)
	}
	for got := 0; got < 10; {
		recs, err := c.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got += len(recs)
	}
	if err := c.CommitUncommitted(ctx); err != nil {
		t.Fatal(err)
	}
	member := c.GroupMetadata().MemberID

	listed, err := a.ListGroups(ctx, GroupFilter{})
	if err != nil || len(listed) != 1 || listed[0] != (ListedGroup{Group: "g1", Coordinator: 1, ProtocolType: "consumer", State: "Stable", Type: "classic"}) {
		t.Fatalf("list: %+v, %v", listed, err)
	}
	if listed, err := a.ListGroups(ctx, GroupFilter{States: []string{"empty"}}); err != nil || len(listed) != 0 {
		t.Fatalf("list Empty groups: %+v, %v", listed, err)
	}

	ds, err := a.DescribeGroups(ctx, "g1", "nope")
	if !errors.Is(err, kerr.GroupIDNotFound) || len(ds) != 2 {
		t.Fatalf("describe g1 nope: %+v, %v", ds, err)
	}
	d := ds[0]
	if d.Err != nil || d.Group != "g1" || d.State != "Stable" || d.ProtocolType != "consumer" || d.Protocol != "cooperative-sticky" || len(d.Members) != 1 {
		t.Fatalf("describe g1: %+v", d)
	}
	m := d.Members[0]
	want := []TopicPartition{{"gt", 0}, {"gt", 1}}
	if m.MemberID != member || m.ClientID != "admin-test" || m.ClientHost == "" || fmt.Sprint(m.Assignment) != fmt.Sprint(want) || fmt.Sprint(m.Topics) != "[gt]" {
		t.Fatalf("member: %+v", m)
	}
	if ds[1].Group != "nope" || !errors.Is(ds[1].Err, kerr.GroupIDNotFound) {
		t.Fatalf("describe nope: %+v", ds[1])
	}

	offs, err := a.FetchOffsets(ctx, "g1")
	if err != nil || len(offs) != 2 || offs[TopicPartition{"gt", 0}].Offset != 5 || offs[TopicPartition{"gt", 1}].Offset != 5 {
		t.Fatalf("fetch offsets: %+v, %v", offs, err)
	}
	if offs, err := a.FetchOffsets(ctx, "nope"); err != nil || len(offs) != 0 {
		t.Fatalf("fetch offsets of an unknown group: %+v, %v", offs, err)
	}

	if res, err := a.DeleteGroups(ctx, "g1"); !errors.Is(err, kerr.NonEmptyGroup) || len(res) != 1 {
		t.Fatalf("delete a group with a member: %+v, %v", res, err)
	}
	c.Close() // leaves the group: Empty
	if listed, err := a.ListGroups(ctx, GroupFilter{States: []string{"Empty"}}); err != nil || len(listed) != 1 || listed[0].Group != "g1" {
		t.Fatalf("list Empty groups after close: %+v, %v", listed, err)
	}
	res, err := a.DeleteGroups(ctx, "g1", "nope")
	if !errors.Is(err, kerr.GroupIDNotFound) || len(res) != 2 || res[0].Err != nil || !errors.Is(res[1].Err, kerr.GroupIDNotFound) {
		t.Fatalf("delete g1 nope: %+v, %v", res, err)
	}
	if _, err := a.DescribeGroups(ctx, "g1"); !errors.Is(err, kerr.GroupIDNotFound) {
		t.Fatalf("describe a deleted group: %v", err)
	}
	if offs, err := a.FetchOffsets(ctx, "g1"); err != nil || len(offs) != 0 {
		t.Fatalf("offsets of a deleted group: %+v, %v", offs, err)
	}
}

func TestIntegrationAdminTransactions(t *testing.T) {
	b := testbroker.Start(t, testbroker.WithoutAutoCreate())
	a := newTestAdmin(t, b.Addr)
	createTopic(t, a, "tt", 2)
	ctx := testCtx(t)
	p := newTestProducer(t, b.Addr, func(c *ProducerConfig) { c.TransactionalID = "tx-a"; c.TransactionTimeout = 90 * time.Second })
	if err := p.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.BeginTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	before := time.Now().Add(-time.Second)
	for i := range 4 {
		p.Produce(ctx, &Record{Topic: "tt", Partition: int32(i % 2), Value: []byte{byte(i)}}, nil)
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	listed, err := a.ListTransactions(ctx, TransactionFilter{})
	if err != nil || len(listed) != 1 || listed[0].TransactionalID != "tx-a" || listed[0].State != "Ongoing" || listed[0].ProducerID < 0 {
		t.Fatalf("list: %+v, %v", listed, err)
	}
	pid := listed[0].ProducerID
	ds, err := a.DescribeTransactions(ctx, "tx-a", "ghost")
	if !errors.Is(err, kerr.TransactionalIDNotFound) || len(ds) != 2 || !errors.Is(ds[1].Err, kerr.TransactionalIDNotFound) {
		t.Fatalf("describe tx-a ghost: %+v, %v", ds, err)
	}
	d := ds[0]
	if d.Err != nil || d.State != "Ongoing" || d.ProducerID != pid || d.ProducerEpoch < 0 || d.Timeout != 90*time.Second ||
		d.StartTime.Before(before) || fmt.Sprint(d.Partitions) != fmt.Sprint([]TopicPartition{{"tt", 0}, {"tt", 1}}) {
		t.Fatalf("describe tx-a: %+v", d)
	}
	tp := TopicPartition{"tt", 1}
	prods, err := a.DescribeProducers(ctx, tp, TopicPartition{"tt", 9})
	if !errors.Is(err, kerr.UnknownTopicOrPartition) || len(prods[tp].Producers) != 1 {
		t.Fatalf("describe producers: %+v, %v", prods, err)
	}
	if ap := prods[tp].Producers[0]; ap.ProducerID != pid || ap.TxnStartOffset != 0 || ap.LastSequence != 1 {
		t.Fatalf("active producer: %+v", ap)
	}

	if err := p.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the transaction completes", func() error {
		ds, err := a.DescribeTransactions(ctx, "tx-a")
		if err != nil || ds[0].State != "CompleteCommit" {
			return fmt.Errorf("%+v, %v", ds, err)
		}
		return nil
	})
	if listed, err := a.ListTransactions(ctx, TransactionFilter{States: []string{"Ongoing"}}); err != nil || len(listed) != 0 {
		t.Fatalf("list Ongoing after commit: %+v, %v", listed, err)
	}
	if _, err := a.ListTransactions(ctx, TransactionFilter{States: []string{"Sleeping"}}); !errors.Is(err, ErrUnknownTransactionState) {
		t.Fatalf("unknown state filter: %v", err)
	}
	prods, err = a.DescribeProducers(ctx, tp)
	if err != nil || prods[tp].Producers[0].TxnStartOffset != -1 {
		t.Fatalf("describe producers after commit: %+v, %v", prods, err)
	}
}

func TestIntegrationAdminSetGroupConfigs(t *testing.T) {
	b := testbroker.Start(t)
	a := newTestAdmin(t, b.Addr)
	ctx := testCtx(t)
	want := map[string]string{"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": "15000"}
	if err := a.SetGroupConfigs(ctx, "cfg-group", want); err != nil {
		t.Fatal(err)
	}
	res, err := a.DescribeConfigs(ctx, ConfigResource{Type: GroupResource, Name: "cfg-group"})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, rc := range res {
		for _, e := range rc.Configs {
			if e.Value != nil && !e.IsDefault {
				got[e.Name] = *e.Value
			}
		}
	}
	for n, v := range want {
		if got[n] != v {
			t.Fatalf("%s = %q after SetGroupConfigs, want %q (all set: %v)", n, got[n], v, got)
		}
	}
	if err := a.SetGroupConfigs(ctx, "cfg-group", map[string]string{"share.auto.offset.reset": "sideways"}); err == nil {
		t.Fatal("an invalid value was accepted")
	}
}
