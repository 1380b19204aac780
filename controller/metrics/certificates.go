package metrics

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// certificates exposes vmipam_certificate_expiration_timestamp_seconds for the serving
// certificate files registered with WatchCertificate. The files are read at scrape time, so a
// rotated certificate (cert-manager renews it in place) shows at once.
type certificates struct {
	mu    sync.Mutex
	files map[string]string // endpoint → path of a PEM certificate
}

var (
	certExpiryDesc = prometheus.NewDesc("vmipam_certificate_expiration_timestamp_seconds",
		"When the serving certificate of an endpoint (webhook, metrics, dryrun) expires, in seconds since the Unix epoch; absent while the file cannot be read.",
		[]string{"endpoint"}, nil)
	servingCertificates = &certificates{files: map[string]string{}}
)

// WatchCertificate makes the PEM certificate at path the serving certificate of endpoint in
// vmipam_certificate_expiration_timestamp_seconds; an empty path stops watching it.
func WatchCertificate(endpoint, path string) {
	servingCertificates.mu.Lock()
	defer servingCertificates.mu.Unlock()
	if path == "" {
		delete(servingCertificates.files, endpoint)
		return
	}
	servingCertificates.files[endpoint] = path
}

// Describe implements prometheus.Collector.
func (c *certificates) Describe(ch chan<- *prometheus.Desc) { ch <- certExpiryDesc }

// Collect implements prometheus.Collector: one sample per readable certificate. A file that
// cannot be read or parsed (not written yet) has no sample rather than failing the whole
// scrape; the endpoint's own errors show elsewhere.
func (c *certificates) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for endpoint, path := range c.files {
		cert, err := readCertificate(path)
		if err != nil {
			continue
		}
		ch <- prometheus.MustNewConstMetric(certExpiryDesc, prometheus.GaugeValue, float64(cert.NotAfter.Unix()), endpoint)
	}
}

// readCertificate parses the first certificate of the PEM file at path: the leaf, by the
// order tls.LoadX509KeyPair expects.
func readCertificate(path string) (*x509.Certificate, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return nil, fmt.Errorf("%s holds no PEM certificate", path)
		}
		if block.Type == "CERTIFICATE" {
			return x509.ParseCertificate(block.Bytes)
		}
	}
}
