package tes

import (
	"github.com/labstack/echo/v4"

	"github.com/elixir-cloud-aai/tesk-knative/tes/openapi"
)

// extensions adds what the service serves besides TES 1.1: a task's Events
// and steps, with the same access rules as a task; the OpenAPI document,
// public like service-info.
func (s *Server) extensions(e *echo.Echo, g *echo.Group) {
	g.GET(KubeEventsPath, s.taskKubeEvents)
	openapi.Register(e, BasePath)
}
