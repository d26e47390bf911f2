// Command registry is the local node's image registry: an OCI distribution
// registry (go-containerregistry's pkg/registry) with blobs on disk, on a
// loopback or bridge address. containerd uses it as the mirror of every
// registry the tests name, so that an image pull on the real node is a real
// pull and an image that is not there fails as it would anywhere.
package main

import (
	"flag"
	"log"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "address to listen on")
	blobs := flag.String("blobs", "", "directory for the blobs (default: in memory)")
	flag.Parse()

	opts := []registry.Option{registry.Logger(log.New(os.Stderr, "registry: ", log.LstdFlags))}
	if *blobs != "" {
		if err := os.MkdirAll(*blobs, 0o755); err != nil {
			log.Fatal(err)
		}
		opts = append(opts, registry.WithBlobHandler(registry.NewDiskBlobHandler(*blobs)))
	}
	l, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("serving on %s", l.Addr())
	s := &http.Server{Handler: registry.New(opts...), ReadHeaderTimeout: 10 * time.Second}
	log.Fatal(s.Serve(l))
}
