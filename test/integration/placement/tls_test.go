package placement

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"time"
)

// tlsClient trusts only ca.
func tlsClient(ca []byte, conns int) *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	return &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{
			TLSClientConfig:     &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
			MaxIdleConns:        conns,
			MaxIdleConnsPerHost: conns,
		},
	}
}
