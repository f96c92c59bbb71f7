package scm

import (
	"context"
	"net"
	"net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"
	utilcache "k8s.io/apimachinery/pkg/util/cache"
)

// Defaults of the limit on failed requests per client address: a burst of
// DefaultFailureBurst, then one more every DefaultFailureInterval.
const (
	DefaultFailureBurst    = 20
	DefaultFailureInterval = 3 * time.Second
	// maxTrackedClients bounds the addresses remembered: the least
	// recently failing are forgotten first.
	maxTrackedClients = 10000
)

// failureLimiter limits the failed requests (no trigger matched, a
// signature that does not verify) of each client address. A client over
// its limit is answered 429 before anything is read or compared, so
// neither guessing secrets nor flooding costs more than a map lookup.
type failureLimiter struct {
	burst    int
	interval time.Duration

	mu      sync.Mutex
	clients *utilcache.LRUExpireCache
}

func newFailureLimiter(burst int, interval time.Duration) *failureLimiter {
	return &failureLimiter{burst: burst, interval: interval, clients: utilcache.NewLRUExpireCache(maxTrackedClients)}
}

// limited says whether addr has no failure left, and when it has one.
func (l *failureLimiter) limited(addr string) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	v, ok := l.clients.Get(addr)
	if !ok {
		return false, 0
	}
	tokens := v.(*rate.Limiter).Tokens()
	if tokens >= 1 {
		return false, 0
	}
	return true, time.Duration((1 - tokens) * float64(l.interval))
}

// failed counts a failure of addr.
func (l *failureLimiter) failed(addr string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var lim *rate.Limiter
	if v, ok := l.clients.Get(addr); ok {
		lim = v.(*rate.Limiter)
	} else {
		lim = rate.NewLimiter(rate.Every(l.interval), l.burst)
	}
	lim.Allow()
	// Once refilled, a limiter is a new one: forget it then.
	l.clients.Add(addr, lim, time.Duration(l.burst)*l.interval)
}

type clientAddressKey struct{}

// WithClientAddress returns ctx naming the client address failures are
// counted against, for a request relayed by a proxy whose identity the
// server verified (the kube-apiserver, see package aggregated): its peer
// address is the proxy's, the same for every client.
func WithClientAddress(ctx context.Context, addr string) context.Context {
	return context.WithValue(ctx, clientAddressKey{}, addr)
}

// clientAddress is the address WithClientAddress put in the request's
// context, else the request's peer address without its port. Headers such
// as X-Forwarded-For are not read: a client sets them as it likes.
func clientAddress(r *http.Request) string {
	if addr, ok := r.Context().Value(clientAddressKey{}).(string); ok && addr != "" {
		return addr
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
