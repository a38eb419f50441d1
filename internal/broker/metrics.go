package broker

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/exactq/exactq/internal/share/sharestate"
)

// Metrics exports the broker's share-group and transactional-acknowledgement state to
// Prometheus. Values are read from the live state at scrape time (no double bookkeeping);
// the TxnShareAcknowledge latency is the only thing observed on the request path.
type Metrics struct {
	b *Broker

	txnShareAckSeconds prometheus.Histogram

	shareRecords   *prometheus.Desc
	inFlight       *prometheus.Desc
	txPending      *prometheus.Desc
	txnAckRecords  *prometheus.Desc
	txPendingTotal *prometheus.Desc
	topics         *prometheus.Desc
}

func newMetrics(b *Broker) *Metrics {
	return &Metrics{
		b: b,
		txnShareAckSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "exactq_txn_share_acknowledge_seconds",
			Help:    "Latency of TxnShareAcknowledge requests, from decode to durable staging.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}),
		shareRecords: prometheus.NewDesc("exactq_share_partition_records_total",
			"Records per share partition by event (acquired, acknowledged, released, rejected, archived, lock_expired, renewed).",
			[]string{"group", "topic", "partition", "event"}, nil),
		inFlight: prometheus.NewDesc("exactq_share_partition_in_flight_records",
			"Records between the share-partition start and end offsets.", []string{"group", "topic", "partition"}, nil),
		txPending: prometheus.NewDesc("exactq_share_partition_tx_pending_records",
			"Records staged in an open transaction (TX_PENDING) in the durable share state, per share partition, loaded or not.", []string{"group", "topic", "partition"}, nil),
		txnAckRecords: prometheus.NewDesc("exactq_txn_share_ack_records_total",
			"Transactional share acknowledgements by outcome (staged, committed, aborted, archived_on_abort).", []string{"outcome"}, nil),
		txPendingTotal: prometheus.NewDesc("exactq_tx_pending_records",
			"Records currently TX_PENDING in the durable share state (every share partition, loaded or not).", nil, nil),
		topics: prometheus.NewDesc("exactq_topics", "Topics, internal ones included.", nil, nil),
	}
}

// Metrics returns the broker's Prometheus collector.
func (b *Broker) Metrics() *Metrics { return b.metrics }

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	m.txnShareAckSeconds.Describe(ch)
	for _, d := range []*prometheus.Desc{m.shareRecords, m.inFlight, m.txPending, m.txnAckRecords, m.txPendingTotal, m.topics} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.txnShareAckSeconds.Collect(ch)
	ch <- prometheus.MustNewConstMetric(m.topics, prometheus.GaugeValue, float64(len(m.b.topics.all())))
	s := m.b.loadedShares()
	if s == nil {
		return
	}
	stats := s.fetch.TxnStats()
	for outcome, v := range map[string]int64{"staged": stats.Staged, "committed": stats.Committed, "aborted": stats.Aborted, "archived_on_abort": stats.ArchivedOnAbort} {
		ch <- prometheus.MustNewConstMetric(m.txnAckRecords, prometheus.CounterValue, float64(v), outcome)
	}
	ch <- prometheus.MustNewConstMetric(m.txPendingTotal, prometheus.GaugeValue, float64(stats.Pending))
	// TX_PENDING per share partition comes from the durable state, like the total: the
	// partitions not loaded since start-up are counted too.
	pending := s.store.TxPendingByKey()
	labelsOf := func(group string, topicID [16]byte, partition int32) []string {
		topic := "unknown"
		if t := m.b.topics.getByID(topicID); t != nil {
			topic = t.name
		}
		return []string{group, topic, strconv.Itoa(int(partition))}
	}
	for _, g := range s.members.ListGroups(nil, nil) {
		for _, d := range s.fetch.Describe(g.Group) {
			labels := labelsOf(g.Group, d.TopicID, d.Partition)
			c := d.Window.Counters
			for event, v := range map[string]int64{"acquired": c.Acquired, "acknowledged": c.Acknowledged, "released": c.Released,
				"rejected": c.Rejected, "archived": c.Archived, "lock_expired": c.LockExpired, "renewed": c.Renewed} {
				ch <- prometheus.MustNewConstMetric(m.shareRecords, prometheus.CounterValue, float64(v), append(labels, event)...)
			}
			ch <- prometheus.MustNewConstMetric(m.inFlight, prometheus.GaugeValue, float64(d.Window.InFlightRecords), labels...)
			k := sharestate.Key{GroupID: g.Group, TopicID: d.TopicID, Partition: d.Partition}
			ch <- prometheus.MustNewConstMetric(m.txPending, prometheus.GaugeValue, float64(pending[k]), labels...)
			delete(pending, k)
		}
	}
	for k, n := range pending {
		ch <- prometheus.MustNewConstMetric(m.txPending, prometheus.GaugeValue, float64(n), labelsOf(k.GroupID, k.TopicID, k.Partition)...)
	}
}

func (m *Metrics) observeTxnShareAck(start time.Time) {
	m.txnShareAckSeconds.Observe(time.Since(start).Seconds())
}
