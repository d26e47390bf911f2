// Package openapi is the OpenAPI document of the TES API as this service
// serves it (TES 1.1 and this service's additions), embedded in the binary
// and served at <BasePath>/openapi.json.
package openapi

import (
	_ "embed"
	"net/http"
	"sync"

	"github.com/labstack/echo/v4"
	"sigs.k8s.io/yaml"
)

// Path is where the document is served, under the API's base path.
const Path = "/openapi.json"

//go:embed openapi.yaml
var source []byte

var (
	once    sync.Once
	doc     []byte
	convErr error
)

// YAML is the document as it is written.
func YAML() []byte { return source }

// JSON is the document as it is served.
func JSON() ([]byte, error) {
	once.Do(func() { doc, convErr = yaml.YAMLToJSON(source) })
	return doc, convErr
}

// Register serves the document at base+Path, without access control (like
// service-info).
func Register(e *echo.Echo, base string) {
	e.GET(base+Path, func(c echo.Context) error {
		b, err := JSON()
		if err != nil {
			return err
		}
		c.Response().Header().Set("Cache-Control", "no-cache")
		return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, b)
	})
}
