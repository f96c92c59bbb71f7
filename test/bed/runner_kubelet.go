package bed

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// kubeletServer is the kubelet endpoint of the bed's nodes: kwok advertises
// its port in every node's status.daemonEndpoints, so the apiserver sends it
// the log requests of `kubectl logs`. The bed opens it before kwok starts, so
// the port is the bed's alone, and keeps it across pod-runner restarts; the
// current runner answers, and without one every request fails with a
// message saying so.
type kubeletServer struct {
	listener net.Listener
	server   *http.Server
	runner   atomic.Pointer[Runner]
}

// startKubeletServer listens with a self-signed certificate on a free port
// of 127.0.0.1. The apiserver has no kubelet CA, so it does not verify it.
func startKubeletServer() (*kubeletServer, error) {
	cert, err := selfSignedCert()
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	k := &kubeletServer{listener: l}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /containerLogs/{namespace}/{pod}/{container}", k.containerLogs)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "the bed's kubelet endpoint serves only /containerLogs", http.StatusNotFound)
	})
	k.server = &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		// The apiserver's connections come and go; their errors are noise.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	go func() { _ = k.server.ServeTLS(l, "", "") }()
	return k, nil
}

// Port is the port nodes advertise as their kubelet endpoint.
func (k *kubeletServer) Port() int { return k.listener.Addr().(*net.TCPAddr).Port }

// Addr is the server's host:port.
func (k *kubeletServer) Addr() string { return k.listener.Addr().String() }

// Close stops the server and ends the requests it is serving.
func (k *kubeletServer) Close() {
	if k != nil {
		_ = k.server.Close()
	}
}

func selfSignedCert() (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "archway-bed-kubelet"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:     []string{"localhost"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(7 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// logOptions are the query parameters of GET /containerLogs the bed honours.
type logOptions struct {
	follow     bool
	timestamps bool
	tailLines  int64 // < 0: all
	limitBytes int64 // <= 0: no limit
	since      time.Time
}

func parseLogOptions(r *http.Request) (logOptions, error) {
	q := r.URL.Query()
	o := logOptions{tailLines: -1}
	var err error
	boolean := func(name string) bool {
		if err != nil || !q.Has(name) {
			return false
		}
		v, e := strconv.ParseBool(q.Get(name))
		if e != nil {
			err = fmt.Errorf("%s: %w", name, e)
		}
		return v
	}
	integer := func(name string, def int64) int64 {
		if err != nil || !q.Has(name) {
			return def
		}
		v, e := strconv.ParseInt(q.Get(name), 10, 64)
		if e != nil {
			err = fmt.Errorf("%s: %w", name, e)
		}
		return v
	}
	o.follow = boolean("follow")
	o.timestamps = boolean("timestamps")
	if boolean("previous") && err == nil {
		return o, errors.New("previous terminated container not found: the bed's pod runner never restarts containers")
	}
	o.tailLines = integer("tailLines", -1)
	o.limitBytes = integer("limitBytes", 0)
	if s := integer("sinceSeconds", 0); s > 0 {
		o.since = time.Now().Add(-time.Duration(s) * time.Second)
	}
	if q.Has("sinceTime") && err == nil {
		if o.since, err = time.Parse(time.RFC3339, q.Get("sinceTime")); err != nil {
			err = fmt.Errorf("sinceTime: %w", err)
		}
	}
	return o, err
}

// containerLogs answers GET /containerLogs/{namespace}/{pod}/{container}
// from the container's log file, as a kubelet does.
func (k *kubeletServer) containerLogs(w http.ResponseWriter, r *http.Request) {
	opts, err := parseLogOptions(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	runner := k.runner.Load()
	if runner == nil {
		http.Error(w, "the bed runs no pod runner (bed.StartPodRunner): pods on kwok nodes have no logs", http.StatusServiceUnavailable)
		return
	}
	ns, pod, container := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container")
	path, done, err := runner.logSource(ns, pod, container)
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	f, err := os.Open(path)
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	defer func() { _ = f.Close() }()
	w.Header().Set("Content-Type", "text/plain")
	out := &logWriter{w: w, opts: opts}
	if !opts.follow {
		done = nil
	}
	if err := streamLog(r.Context(), f, done, runner.ctx.Done(), out); err != nil && !errors.Is(err, errLimitReached) {
		// The status line is gone already; end the stream.
		return
	}
}

// errLimitReached ends a stream at limitBytes.
var errLimitReached = errors.New("limitBytes reached")

// logWriter writes log records as the client asked: with or without
// timestamps, from a time on, up to a number of bytes, flushing each one.
type logWriter struct {
	w       http.ResponseWriter
	opts    logOptions
	written int64
}

func (lw *logWriter) write(rec logRecord) error {
	if !lw.opts.since.IsZero() && rec.time.Before(lw.opts.since) {
		return nil
	}
	var b bytes.Buffer
	if lw.opts.timestamps {
		b.WriteString(rec.time.Format(time.RFC3339Nano))
		b.WriteByte(' ')
	}
	b.WriteString(rec.text)
	if !rec.partial {
		b.WriteByte('\n')
	}
	data := b.Bytes()
	if lim := lw.opts.limitBytes; lim > 0 && lw.written+int64(len(data)) > lim {
		data = data[:lim-lw.written]
	}
	n, err := lw.w.Write(data)
	lw.written += int64(n)
	if err != nil {
		return err
	}
	if f, ok := lw.w.(http.Flusher); ok {
		f.Flush()
	}
	if lim := lw.opts.limitBytes; lim > 0 && lw.written >= lim {
		return errLimitReached
	}
	return nil
}

// logRecord is one line of a log file in the CRI format kubelets write:
// "<RFC3339Nano time> <stdout|stderr> <F|P> <text>"; P marks a line cut
// into pieces, the last of which has F.
type logRecord struct {
	time    time.Time
	stream  string
	partial bool
	text    string
}

func parseLogRecord(line string) (logRecord, bool) {
	ts, rest, ok1 := strings.Cut(line, " ")
	stream, rest, ok2 := strings.Cut(rest, " ")
	tag, text, ok3 := strings.Cut(rest, " ")
	if !ok1 || !ok2 || !ok3 {
		return logRecord{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return logRecord{}, false
	}
	return logRecord{time: t, stream: stream, partial: tag == "P", text: text}, true
}

// streamLog writes f's records to out, the last opts.tailLines lines first;
// with a done channel it then follows the file until done is closed (the
// container has ended and its output is all in the file), ctx ends or stop
// is closed.
func streamLog(ctx context.Context, f *os.File, done, stop <-chan struct{}, out *logWriter) error {
	rd := bufio.NewReader(f)
	var pending []byte // a record not yet complete in the file
	var first []logRecord
	readAll := func(emit func(logRecord) error) error {
		for {
			chunk, err := rd.ReadBytes('\n')
			pending = append(pending, chunk...)
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
			line := string(pending[:len(pending)-1])
			pending = pending[:0]
			if rec, ok := parseLogRecord(line); ok {
				if err := emit(rec); err != nil {
					return err
				}
			}
		}
	}
	if err := readAll(func(rec logRecord) error { first = append(first, rec); return nil }); err != nil {
		return err
	}
	if n := out.opts.tailLines; n >= 0 {
		first = tailRecords(first, n)
	}
	for _, rec := range first {
		if err := out.write(rec); err != nil {
			return err
		}
	}
	if done == nil {
		return nil
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		finished := false
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-stop:
			return nil
		case <-done:
			finished = true
		case <-tick.C:
		}
		if err := readAll(out.write); err != nil {
			return err
		}
		if finished {
			return nil
		}
	}
}

// tailRecords keeps the records of the last n lines, a line being a run of
// partial records ended by a full one.
func tailRecords(recs []logRecord, n int64) []logRecord {
	if n == 0 {
		return nil
	}
	lines := int64(0)
	for i := len(recs) - 1; i >= 0; i-- {
		if !recs[i].partial || i == len(recs)-1 {
			if lines == n {
				return recs[i+1:]
			}
			lines++
		}
	}
	return recs
}
