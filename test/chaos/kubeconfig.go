package chaos

import (
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"

	"k8s.io/client-go/tools/clientcmd"
)

// ServeTLS serves h over TLS on 127.0.0.1 and returns the server and the
// PEM of its certificate, to be trusted as the CA of a kubeconfig.
func ServeTLS(h http.Handler) (*httptest.Server, []byte) {
	s := httptest.NewUnstartedServer(h)
	// Clients killed mid-handshake are part of a chaos run, not news.
	s.Config.ErrorLog = log.New(io.Discard, "", 0)
	s.StartTLS()
	return s, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw})
}

// RedirectKubeconfig writes to out a copy of the kubeconfig in with its
// clusters point to server and trust caPEM; credentials are kept, so a
// proxy at server passes them on to the API server.
func RedirectKubeconfig(in, out, server string, caPEM []byte) error {
	cfg, err := clientcmd.LoadFromFile(in)
	if err != nil {
		return fmt.Errorf("load %s: %w", in, err)
	}
	if len(cfg.Clusters) == 0 {
		return fmt.Errorf("%s: no clusters", in)
	}
	for _, c := range cfg.Clusters {
		c.Server = server
		c.CertificateAuthority = ""
		c.CertificateAuthorityData = caPEM
	}
	return clientcmd.WriteToFile(*cfg, out)
}
