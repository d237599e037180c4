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
// then checked with LIKE. A shorter fragment is looked for by LIKE alone.
const gramLen = 3

// minGramTerm is the shortest fragment, in bytes, that grams find.
const minGramTerm = 2*gramLen - 1

// idGramsSQL is idGrams in SQL, for the rows written before the column
// (migration 10) and the bench's bulk load; the write path computes the
// grams itself, which costs PostgreSQL nothing (a test checks they agree).
// An id's bytes are those of the database's encoding, UTF-8 as stamen's
// databases are created.
const idGramsSQL = `CREATE FUNCTION stamen_id_grams(id text) RETURNS int4[] LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
	SELECT coalesce(array_agg((get_byte(b, i) << 16) | (get_byte(b, i + 1) << 8) | get_byte(b, i + 2) ORDER BY i), '{}')
	FROM (SELECT convert_to(lower(id COLLATE "C"), 'UTF8') AS b) AS x, generate_series(0, length(b) - 3, 3) AS i
$$;`

// idGrams appends to dst the aligned grams of id folded as lower() folds
// a COLLATE "C" column (ASCII letters only), in PostgreSQL's array
// literal ({1,2,3}), the text the upsert casts to int4[].
func idGrams(dst []byte, id string) []byte {
	dst = append(dst, '{')
	for i := 0; i+gramLen <= len(id); i += gramLen {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendInt(dst, int64(gram(foldASCII(id[i]), foldASCII(id[i+1]), foldASCII(id[i+2]))), 10)
	}
	return append(dst, '}')
}

// termGrams returns, for a fragment of the folded id (as a search term is
// compared, lower-cased), the grams each of its first gramLen offsets
// covers; nil for a fragment shorter than minGramTerm.
func termGrams(term string) [][]int32 {
	if len(term) < minGramTerm {
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

func gram(a, b, c byte) int32 { return int32(a)<<16 | int32(b)<<8 | int32(c) }

func foldASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}
