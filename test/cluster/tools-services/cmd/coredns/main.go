// Command coredns is CoreDNS v1.15.0 with only the plugins the local
// cluster's DNS uses: kubernetes (the cluster's names), bind, errors, log,
// cache, health and ready. There is no forward plugin, so no query leaves
// this machine: a name outside the cluster's zones is refused.
package main

import (
	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"

	"github.com/coredns/coredns/coremain"
)

func main() {
	coremain.Run()
}
