package cluster

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki is the set of keys and certificates of one cluster, written to
// <dir>/pki.
type pki struct {
	dir string
}

func (p pki) path(name string) string { return filepath.Join(p.dir, name) }

// writePKI creates a CA, serving certificates for the API server (for
// 127.0.0.1, the kubernetes Service's address and apiIPs) and for kwok's
// kubelet server, an admin client certificate (group system:masters) and the
// service account signing key pair.
func writePKI(dir string, apiIPs ...net.IP) (pki, error) {
	p := pki{dir: dir}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return p, err
	}
	now := time.Now().Add(-time.Hour)
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return p, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "tesk-knative-test-ca"},
		NotBefore:             now,
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, caKey.Public(), caKey)
	if err != nil {
		return p, err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return p, err
	}
	if err := writeCert(p.path("ca.crt"), caDER); err != nil {
		return p, err
	}
	if err := writeKey(p.path("ca.key"), caKey); err != nil {
		return p, err
	}

	issue := p.issueWith(caCert, caKey, now)
	loopback := []net.IP{net.ParseIP("127.0.0.1")}
	if err := issue("apiserver", 2, pkix.Name{CommonName: "kube-apiserver"},
		[]x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		append(append(loopback, net.ParseIP(serviceIP)), apiIPs...),
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}); err != nil {
		return p, err
	}
	if err := issue("kubelet", 3, pkix.Name{CommonName: "kwok-kubelet"},
		[]x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, loopback, []string{"localhost"}); err != nil {
		return p, err
	}
	if err := issue("admin", 4, pkix.Name{CommonName: "kubernetes-admin", Organization: []string{"system:masters"}},
		[]x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, nil, nil); err != nil {
		return p, err
	}

	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return p, err
	}
	if err := writeKey(p.path("sa.key"), saKey); err != nil {
		return p, err
	}
	pub, err := x509.MarshalPKIXPublicKey(saKey.Public())
	if err != nil {
		return p, err
	}
	if err := os.WriteFile(p.path("sa.pub"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o600); err != nil {
		return p, err
	}
	return p, nil
}

// issueWith returns a function that issues a certificate signed by the CA
// and writes it as <name>.crt and <name>.key.
func (p pki) issueWith(caCert *x509.Certificate, caKey crypto.Signer, now time.Time) func(name string, serial int64, subject pkix.Name, usage []x509.ExtKeyUsage, ips []net.IP, dns []string) error {
	return func(name string, serial int64, subject pkix.Name, usage []x509.ExtKeyUsage, ips []net.IP, dns []string) error {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return err
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial),
			Subject:      subject,
			NotBefore:    now,
			NotAfter:     now.Add(10 * 365 * 24 * time.Hour),
			KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
			ExtKeyUsage:  usage,
			IPAddresses:  ips,
			DNSNames:     dns,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, key.Public(), caKey)
		if err != nil {
			return err
		}
		if err := writeCert(p.path(name+".crt"), der); err != nil {
			return err
		}
		return writeKey(p.path(name+".key"), key)
	}
}

// issue issues a certificate signed by the CA written by writePKI.
func (p pki) issue(name string, serial int64, subject pkix.Name, usage []x509.ExtKeyUsage, ips []net.IP, dns []string) error {
	crtPEM, err := os.ReadFile(p.path("ca.crt"))
	if err != nil {
		return err
	}
	keyPEM, err := os.ReadFile(p.path("ca.key"))
	if err != nil {
		return err
	}
	cb, _ := pem.Decode(crtPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return fmt.Errorf("the CA in %s is not PEM", p.dir)
	}
	caCert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return err
	}
	k, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return err
	}
	caKey, ok := k.(crypto.Signer)
	if !ok {
		return fmt.Errorf("the CA key in %s cannot sign", p.dir)
	}
	return p.issueWith(caCert, caKey, time.Now().Add(-time.Hour))(name, serial, subject, usage, ips, dns)
}

func writeCert(path string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
}

func writeKey(path string, key crypto.Signer) error {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fmt.Errorf("marshal key: %w", err)
	}
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600)
}
