package ociimage

import (
	"math/rand"
	"os"
	"path/filepath"
	"testing"
)

// benchBinary writes a 16 MiB file, the size of the handler's binary: half
// random bytes, half zeros, about as compressible as a Go program.
func benchBinary(b *testing.B) string {
	b.Helper()
	data := make([]byte, 16<<20)
	r := rand.New(rand.NewSource(1))
	for i := 0; i < len(data); i += 4096 {
		r.Read(data[i : i+2048])
	}
	p := filepath.Join(b.TempDir(), "handler")
	if err := os.WriteFile(p, data, 0o755); err != nil {
		b.Fatal(err)
	}
	return p
}

// BenchmarkLayer: tar and gzip one 16 MiB program into a layer, digests
// included (MB/s of the program).
func BenchmarkLayer(b *testing.B) {
	bin := benchBinary(b)
	b.SetBytes(16 << 20)
	for b.Loop() {
		l, err := BinaryTree(Handler, bin).Layer()
		if err != nil {
			b.Fatal(err)
		}
		if _, err := l.Digest(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWriteArchive: a service image (base layer and a 16 MiB program)
// assembled and written as a tarball.
func BenchmarkWriteArchive(b *testing.B) {
	bin := benchBinary(b)
	ca := filepath.Join(b.TempDir(), "ca.crt")
	if err := os.WriteFile(ca, make([]byte, 200<<10), 0o644); err != nil {
		b.Fatal(err)
	}
	out := filepath.Join(b.TempDir(), "handler.tar")
	b.SetBytes(16 << 20)
	for b.Loop() {
		img, err := NewImage(ServiceConfig(Handler),
			LayerSpec{Tree: BaseTree(ca, ""), CreatedBy: "base"},
			LayerSpec{Tree: BinaryTree(Handler, bin), CreatedBy: "handler"})
		if err != nil {
			b.Fatal(err)
		}
		if err := WriteArchive(out, img, DefaultHandlerImage); err != nil {
			b.Fatal(err)
		}
	}
}
