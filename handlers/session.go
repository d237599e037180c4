package handlers

import (
	"github.com/go-openapi/runtime/middleware"

	"github.com/stamen-dev/stamen/gen/models"
	"github.com/stamen-dev/stamen/internal/auth"
	sessionops "github.com/stamen-dev/stamen/restapi/operations/session"
)

// getSession tells the caller who stamen takes it for, so that the
// dashboard shows only the controls the caller may use. The caller comes
// from the request's context, where the authentication middleware put it:
// a new way of signing in is covered once it fills auth.Principal.
func (h *Handlers) getSession(p sessionops.GetSessionParams, _ any) middleware.Responder {
	pr := auth.PrincipalFrom(p.HTTPRequest.Context())
	name, method := pr.Name, pr.Method
	if name == "" {
		name = auth.Anonymous
	}
	if method == "" {
		method = auth.MethodNone
	}
	role := pr.Role.String()
	return sessionops.NewGetSessionOK().WithPayload(&models.Session{
		User:     &name,
		Role:     &role,
		Auth:     &method,
		ReadOnly: &h.ReadOnly,
	})
}
