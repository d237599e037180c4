package signin

import (
	"errors"
	"slices"

	"github.com/stamen-dev/stamen/internal/auth"
)

// Rules decide who may sign in, and as what.
//
//   - Allow (Flower's --auth), when set, is who may sign in at all: anyone
//     else is refused, whatever the other rules say.
//   - Operators and OperatorGroups make an operator; Viewers and
//     ViewerGroups a viewer. Operator wins when both match.
//   - With no role rule at all, everyone Allow admits is an operator, as
//     everyone signed in to Flower may do everything.
//   - With role rules, someone admitted by Allow whom no role rule matches
//     is refused (403).
type Rules struct {
	Allow                        *Pattern
	Operators, Viewers           *Pattern
	OperatorGroups, ViewerGroups []string
}

// Check refuses rules that admit no one.
func (r Rules) Check() error {
	if r.Allow == nil && !r.hasRoleRules() {
		return errors.New("say who may sign in: --auth (Flower's e-mail pattern), --auth_operators/--auth_viewers, or --oidc_operator_groups/--oidc_viewer_groups")
	}
	return nil
}

func (r Rules) hasRoleRules() bool {
	return r.Operators != nil || r.Viewers != nil || len(r.OperatorGroups) > 0 || len(r.ViewerGroups) > 0
}

// Role is the role of a person with this e-mail address (empty when the
// provider vouched for none) and these groups; None refuses them.
func (r Rules) Role(email string, groups []string) auth.Role {
	if r.Allow != nil && !r.Allow.Match(email) {
		return auth.None
	}
	switch {
	case r.Operators.Match(email) || anyIn(groups, r.OperatorGroups):
		return auth.Operator
	case r.Viewers.Match(email) || anyIn(groups, r.ViewerGroups):
		return auth.Viewer
	case !r.hasRoleRules() && r.Allow != nil:
		return auth.Operator
	}
	return auth.None
}

// Relevant keeps of groups those a rule names: what a session must carry
// for its role to be decided again on each request, and no more (a cookie
// is bounded, and a person's groups may be hundreds).
func (r Rules) Relevant(groups []string) []string {
	var out []string
	for _, g := range groups {
		if (slices.Contains(r.OperatorGroups, g) || slices.Contains(r.ViewerGroups, g)) && !slices.Contains(out, g) {
			out = append(out, g)
		}
	}
	return out
}

// usesGroups tells whether a group rule is configured: providers then ask
// for the person's groups.
func (r Rules) usesGroups() bool {
	return len(r.OperatorGroups) > 0 || len(r.ViewerGroups) > 0
}

func anyIn(have, want []string) bool {
	for _, g := range have {
		if slices.Contains(want, g) {
			return true
		}
	}
	return false
}
