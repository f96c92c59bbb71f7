package monitoring

import (
	"context"
	"math"
	"slices"
	"sync"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/util/annotations"
)

// store holds scraped samples in memory and serves them to the PromQL
// engine (storage.Queryable), as Prometheus' TSDB would: the test needs
// none of the TSDB's persistence, only its answers.
type store struct {
	mu     sync.Mutex
	series map[string]*memSeries
}

type memSeries struct {
	lset    labels.Labels
	samples []chunks.Sample
}

func newStore() *store { return &store{series: map[string]*memSeries{}} }

// add appends a sample at t (milliseconds); samples of a series come in
// time order.
func (s *store) add(lset labels.Labels, t int64, v float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := lset.String()
	ms := s.series[key]
	if ms == nil {
		ms = &memSeries{lset: lset}
		s.series[key] = ms
	}
	ms.samples = append(ms.samples, fsample{t: t, f: v})
}

// stale marks the series ended at t, as Prometheus does when a series
// leaves a scrape or its target stops answering.
func (s *store) stale(key string, t int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ms := s.series[key]; ms != nil {
		ms.samples = append(ms.samples, fsample{t: t, f: math.Float64frombits(value.StaleNaN)})
	}
}

func (s *store) Querier(mint, maxt int64) (storage.Querier, error) {
	return &querier{s: s, mint: mint, maxt: maxt}, nil
}

type querier struct {
	s          *store
	mint, maxt int64
}

func (q *querier) Select(_ context.Context, _ bool, _ *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
	q.s.mu.Lock()
	defer q.s.mu.Unlock()
	var out []storage.Series
	for _, ser := range q.s.series {
		if !matches(ser.lset, ms) {
			continue
		}
		var in []chunks.Sample
		for _, smp := range ser.samples {
			if smp.T() >= q.mint && smp.T() <= q.maxt {
				in = append(in, smp)
			}
		}
		if len(in) > 0 {
			out = append(out, storage.NewListSeries(ser.lset, in))
		}
	}
	slices.SortFunc(out, func(a, b storage.Series) int { return labels.Compare(a.Labels(), b.Labels()) })
	return &seriesSet{series: out, i: -1}
}

func matches(lset labels.Labels, ms []*labels.Matcher) bool {
	for _, m := range ms {
		if !m.Matches(lset.Get(m.Name)) {
			return false
		}
	}
	return true
}

func (q *querier) LabelValues(context.Context, string, *storage.LabelHints, ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	return nil, nil, nil
}

func (q *querier) LabelNames(context.Context, *storage.LabelHints, ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	return nil, nil, nil
}

func (q *querier) Close() error { return nil }

type seriesSet struct {
	series []storage.Series
	i      int
}

func (s *seriesSet) Next() bool                        { s.i++; return s.i < len(s.series) }
func (s *seriesSet) At() storage.Series                { return s.series[s.i] }
func (s *seriesSet) Err() error                        { return nil }
func (s *seriesSet) Warnings() annotations.Annotations { return nil }

// fsample is one float sample.
type fsample struct {
	t int64
	f float64
}

func (s fsample) T() int64                      { return s.t }
func (s fsample) ST() int64                     { return 0 }
func (s fsample) F() float64                    { return s.f }
func (s fsample) H() *histogram.Histogram       { return nil }
func (s fsample) FH() *histogram.FloatHistogram { return nil }
func (s fsample) Type() chunkenc.ValueType      { return chunkenc.ValFloat }
func (s fsample) Copy() chunks.Sample           { return s }
