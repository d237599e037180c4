package handlers

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-openapi/runtime"

	"github.com/stamen-dev/stamen/gen/models"
	"github.com/stamen-dev/stamen/internal/state"
	"github.com/stamen-dev/stamen/restapi/operations/tasks"
)

// TestStrictJSONRefusesWhatFlowerWouldNotRead: a task body is read as
// written or refused, never read as something else.
func TestStrictJSONRefusesWhatFlowerWouldNotRead(t *testing.T) {
	c := strictJSON()
	for _, body := range []string{
		`{"ARGS":[2]}`,               // case-folded key
		`{"args":[1],"Args":[2]}`,    // case-folded key overriding args
		`{"Task_Id":"mine"}`,         // case-folded option
		`{"args":[1]} {"args":[2]}`,  // a second JSON value
		`{}garbage`,                  // trailing garbage
		"{\"args\":[\"\xff\"]}",      // not UTF-8
		"{\"task_id\":\"\xff\xfe\"}", // not UTF-8
		`{"unknown":1}`,              // unknown key (as before)
	} {
		var v models.TaskApplyRequest
		if err := c.Consume(strings.NewReader(body), &v); err == nil {
			t.Errorf("%q accepted as %+v", body, v)
		}
	}
	for _, body := range []string{`{}`, `null`, `{"args":[1,2],"kwargs":{"X":1,"x":2},"headers":{"A":1}}`, "{\"args\":[\"\u2603\"]}\n"} {
		var v models.TaskApplyRequest
		if err := c.Consume(strings.NewReader(body), &v); err != nil {
			t.Errorf("%q refused: %v", body, err)
		}
	}
}

// TestValidNameRefusesInvalidUTF8: /api/task/send-task/%FF must not send a
// task named U+FFFD.
func TestValidNameRefusesInvalidUTF8(t *testing.T) {
	for _, s := range []string{"\xff", "a\xc0\xafb", "tasks.\xfe"} {
		if validName(s) {
			t.Errorf("validName(%q) = true", s)
		}
	}
	for _, s := range []string{"tasks.add", "tasks.unié", "☃"} {
		if !validName(s) {
			t.Errorf("validName(%q) = false", s)
		}
	}
}

// TestTaskTypesEmptyIsAList: Flower answers {"task-types": []} before any
// task is seen, not null.
func TestTaskTypesEmptyIsAList(t *testing.T) {
	h := New(Config{State: state.New(state.Config{})})
	req := httptest.NewRequest("GET", "/api/task/types", nil).WithContext(context.Background())
	rec := httptest.NewRecorder()
	h.listTaskTypes(tasks.ListTaskTypesParams{HTTPRequest: req}, nil).WriteResponse(rec, runtime.JSONProducer())
	if got := strings.TrimSpace(rec.Body.String()); got != `{"task-types":[]}` {
		t.Errorf("body = %s, want {\"task-types\":[]}", got)
	}
}

// TestTypeErrorsInTheClientsTerms: a value of the wrong JSON type is named
// by its field and JSON types, not by Go's.
func TestTypeErrorsInTheClientsTerms(t *testing.T) {
	for body, want := range map[string]string{
		`{"args": 5}`:     "args must be a list, not number",
		`{"kwargs": [1]}`: "kwargs must be an object, not array",
		`{"queue": 7}`:    "queue must be a string, not number",
		`[1, 2]`:          "it must be an object, not array",
	} {
		var v models.TaskApplyRequest
		if err := strictJSON().Consume(strings.NewReader(body), &v); err == nil || err.Error() != want {
			t.Errorf("%s: %v, want %q", body, err, want)
		}
	}
}
