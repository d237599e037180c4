package tasksearch

import "github.com/stamen-dev/stamen/internal/pyfmt"

// kwargs:key=value search terms match against the pairs of the task's
// kwargs, which the worker reports as a Python repr ("{'user': 42}").
// Flower reads it with ast.literal_eval and turns each item into
// "casefold(str(key))=casefold(str(value))", with None as the empty
// string.

// kwargsPairs appends the "key=value" pairs of a kwargs repr to dst; a
// repr that is not a dict literal (say, truncated by the worker) has none.
func kwargsPairs(dst []string, kwargs string) []string {
	v, err := pyfmt.Parse(kwargs)
	if err != nil || v.Kind() != pyfmt.Dict {
		return dst
	}
	items := v.Items()
	for i := 0; i+1 < len(items); i += 2 {
		dst = append(dst, pyfmt.Fold(flowerStr(items[i]))+"="+pyfmt.Fold(flowerStr(items[i+1])))
	}
	return dst
}

// flowerStr is Flower's view of one value: str(value), None as "".
func flowerStr(v pyfmt.Value) string {
	if v.Kind() == pyfmt.None {
		return ""
	}
	return v.Str()
}
