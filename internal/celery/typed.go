package celery

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/stamen-dev/stamen/internal/pyfmt"
)

// kombu 5.3 (Celery 5.3) changed how its JSON serializer writes a few Python
// types: a datetime, date, time, Decimal, UUID or bytes value became
// {"__type__": t, "__value__": v}, where kombu 5.2 wrote a plain string. The
// same task therefore reads differently depending on the workers' release.
// stamen shows every such value as kombu 5.2 wrote it, whatever the release:
//
//	datetime  ISO 8601; a UTC offset of zero is written "Z"
//	date      ISO 8601 at midnight ("2024-01-02T00:00:00": 5.2 encoded a
//	          date as the datetime at its start)
//	time      ISO 8601 ("03:04:05.123000")
//	decimal   its text ("1.10")
//	uuid      the canonical 8-4-4-4-12 form (5.3+ sends {"hex": ...})
//	bytes     the text (5.3+ writes UTF-8 bytes as "bytes")
//	base64    the base64 text (bytes that are not UTF-8; 5.2 could not
//	          send them at all)
//
// Markers of other types (registered by an application) are left as they are.

// typedText is the kombu 5.2 text of a kombu ≥5.3 typed value, false for a
// marker this package does not know.
func typedText(typ string, value json.RawMessage) (string, bool) {
	if typ == "uuid" {
		var v struct {
			Hex *string `json:"hex"`
		}
		if json.Unmarshal(value, &v) == nil && v.Hex != nil {
			return pyfmt.CanonicalUUID(*v.Hex)
		}
		var s string
		if json.Unmarshal(value, &s) == nil {
			return pyfmt.CanonicalUUID(s)
		}
		return "", false
	}
	var s string
	if json.Unmarshal(value, &s) != nil {
		return "", false
	}
	switch typ {
	case "datetime":
		if t, ok := strings.CutSuffix(s, "+00:00"); ok {
			return t + "Z", true
		}
		return s, true
	case "date":
		if len(s) == len("2006-01-02") {
			return s + "T00:00:00", true
		}
		return s, true
	case "time", "decimal", "bytes", "base64":
		return s, true
	}
	return "", false
}

// typedMarker is the quick test for whether a JSON document may hold typed
// values at all: most do not, and are then returned untouched.
var typedMarker = []byte(`"__type__"`)

// PlainJSON rewrites every kombu ≥5.3 typed value in a JSON document as the
// plain string kombu 5.2 wrote (see typedText), keeping everything else,
// including the order of object keys. A document without markers is returned
// as it is.
func PlainJSON(data []byte) ([]byte, error) {
	return plainJSON(data, nil)
}

// plainJSON is PlainJSON; top, when set, may replace the string value of a
// key of the top-level object (before typed values are looked at).
func plainJSON(data []byte, top func(key, value string) (string, bool)) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var b bytes.Buffer
	b.Grow(len(data))
	if err := writePlain(&b, dec, top); err != nil {
		return nil, fmt.Errorf("decode kombu typed JSON: %w", err)
	}
	if _, err := dec.Token(); err == nil {
		return nil, fmt.Errorf("decode kombu typed JSON: trailing data")
	}
	return b.Bytes(), nil
}

// writePlain copies the next JSON value from dec to b, compacted, with typed
// values replaced.
func writePlain(b *bytes.Buffer, dec *json.Decoder, top func(key, value string) (string, bool)) error {
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return err
	}
	return writePlainRaw(b, raw, top)
}

func writePlainRaw(b *bytes.Buffer, raw json.RawMessage, top func(key, value string) (string, bool)) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return fmt.Errorf("empty value")
	}
	switch raw[0] {
	case '{':
		keys, vals, err := ObjectMembers(raw)
		if err != nil {
			return err
		}
		if len(keys) == 2 && ((keys[0] == "__type__" && keys[1] == "__value__") || (keys[0] == "__value__" && keys[1] == "__type__")) {
			ti, vi := 0, 1
			if keys[0] == "__value__" {
				ti, vi = 1, 0
			}
			var typ string
			if json.Unmarshal(vals[ti], &typ) == nil {
				if s, ok := typedText(typ, vals[vi]); ok {
					return writeJSONString(b, s)
				}
			}
		}
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeJSONString(b, k); err != nil {
				return err
			}
			b.WriteByte(':')
			if top != nil {
				var s string
				if len(vals[i]) > 0 && vals[i][0] == '"' && json.Unmarshal(vals[i], &s) == nil {
					if r, ok := top(k, s); ok {
						if err := writeJSONString(b, r); err != nil {
							return err
						}
						continue
					}
				}
			}
			if err := writePlainRaw(b, vals[i], nil); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	case '[':
		var elems []json.RawMessage
		if err := json.Unmarshal(raw, &elems); err != nil {
			return err
		}
		b.WriteByte('[')
		for i, e := range elems {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writePlainRaw(b, e, nil); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	default:
		return json.Compact(b, raw)
	}
	return nil
}

// ObjectMembers splits a JSON object into its keys and raw values, in
// order (a map would lose it: Celery tries task_routes' patterns in turn).
func ObjectMembers(raw []byte) ([]string, []json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil {
		return nil, nil, err
	} else if t != json.Delim('{') {
		return nil, nil, errors.New("not a JSON object")
	}
	var keys []string
	var vals []json.RawMessage
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return nil, nil, err
		}
		key, ok := k.(string)
		if !ok {
			return nil, nil, fmt.Errorf("object key is %T", k)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, nil, err
		}
		keys = append(keys, key)
		vals = append(vals, v)
	}
	if _, err := dec.Token(); err != nil { // }
		return nil, nil, err
	}
	return keys, vals, nil
}

func writeJSONString(b *bytes.Buffer, s string) error {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		return err
	}
	b.Truncate(b.Len() - 1) // Encode's newline
	return nil
}
