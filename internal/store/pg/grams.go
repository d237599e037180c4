package pg

import "strconv"

// An id fragment is found through its aligned 3-grams rather than through
// the trigram index over the searched text. A task's id_grams column holds
// the 3-byte pieces its folded id starts with at every third byte, each
// packed into an int: 12 for a Celery uuid4, against the 37 trigrams
// pg_trgm makes of one, and the trigrams' index maintenance was the
// largest part of what a new task cost the database (bench/RESULTS.md).
// Any occurrence of a fragment of 2×gramLen-1 bytes or more covers whole
// aligned pieces, those of the fragment from one of its first gramLen
// offsets, so a row whose grams hold all of one offset's is a candidate,
// then checked with LIKE.
//
// Only ids of hex digits and hyphens (uuids, as Celery makes them) have
// grams; the others keep NULL and are found through the trigram index of
// such rows' ids, as are the rows written before the column. So a term
// with any other character is looked for in those ids only, through that
// index, whatever its length; a shorter hex term is looked for by LIKE in
// every id, which a page of the newest tasks finds soon (3 hex characters
// are in about one uuid in a hundred) but a rare one only after reading
// much of the table.
const gramLen = 3

// minGramTerm is the shortest fragment, in bytes, that grams find.
const minGramTerm = 2*gramLen - 1

// idGramsSQL is idGrams in SQL, for the rows written before the column
// (migration 10) and the bench's bulk load; the write path computes the
// grams itself, which costs PostgreSQL nothing (a test checks they agree).
const idGramsSQL = `CREATE FUNCTION stamen_id_grams(id text) RETURNS int4[] LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
	SELECT CASE WHEN id COLLATE "C" ~ '^[0-9A-Fa-f-]*$' THEN (SELECT coalesce(array_agg(
		(ascii(substr(l, i, 1)) << 16) | (ascii(substr(l, i + 1, 1)) << 8) | ascii(substr(l, i + 2, 1)) ORDER BY i), '{}')
		FROM (SELECT lower(id COLLATE "C") AS l) AS x, generate_series(1, length(l) - 2, 3) AS i) END
$$;`

// idGrams appends to dst the aligned grams of id folded as lower() folds
// a COLLATE "C" column, in PostgreSQL's array literal ({1,2,3}), the text
// the upsert casts to int4[]; ok is false for an id that has none (hexID).
func idGrams(dst []byte, id string) (_ []byte, ok bool) {
	if !hexID(id) {
		return dst, false
	}
	dst = append(dst, '{')
	for i := 0; i+gramLen <= len(id); i += gramLen {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendInt(dst, int64(gram(foldHex(id[i]), foldHex(id[i+1]), foldHex(id[i+2]))), 10)
	}
	return append(dst, '}'), true
}

// hexID reports whether id is of hex digits and hyphens only, the ids
// that have grams.
func hexID(id string) bool {
	for i := 0; i < len(id); i++ {
		if !isHex(foldHex(id[i])) {
			return false
		}
	}
	return true
}

// termGrams returns, for a fragment of the folded id (as a search term is
// compared, lower-cased), the grams each of its first gramLen offsets
// covers; nil for a fragment shorter than minGramTerm or one no id with
// grams holds (hexID).
func termGrams(term string) [][]int32 {
	if len(term) < minGramTerm || !hexTerm(term) {
		return nil
	}
	out := make([][]int32, gramLen)
	for o := range gramLen {
		for i := o; i+gramLen <= len(term); i += gramLen {
			out[o] = append(out[o], gram(term[i], term[i+1], term[i+2]))
		}
	}
	return out
}

// hexTerm reports whether a folded term can be in an id with grams.
func hexTerm(term string) bool {
	for i := 0; i < len(term); i++ {
		if !isHex(term[i]) {
			return false
		}
	}
	return true
}

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || c == '-' }

func gram(a, b, c byte) int32 { return int32(a)<<16 | int32(b)<<8 | int32(c) }

// foldHex folds an upper-case hex digit; an id with any other letter has
// no grams.
func foldHex(c byte) byte {
	if 'A' <= c && c <= 'F' {
		return c + 'a' - 'A'
	}
	return c
}
