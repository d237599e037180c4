package signin

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// sealer encrypts and authenticates cookie values with AES-256-GCM under
// a key derived (HKDF-SHA256) from the cookie secret. Every replica given
// the same secret derives the same key, so a cookie sealed by one is
// opened by all, and by the same process after a restart: the sessions
// are kept by the browsers, not by stamen. Each value is bound to its
// cookie's name (the AEAD's additional data), so a login cookie cannot be
// passed off as a session.
type sealer struct {
	aead cipher.AEAD
}

// MinSecretLen is the shortest cookie secret accepted.
const MinSecretLen = 16

func newSealer(secret []byte) (*sealer, error) {
	if len(secret) < MinSecretLen {
		return nil, fmt.Errorf("the cookie secret must be at least %d bytes long", MinSecretLen)
	}
	key, err := hkdf.Key(sha256.New, secret, nil, "stamen session cookie v1", 32)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &sealer{aead: aead}, nil
}

// sealed is what every cookie value carries besides its payload: when it
// stops being valid.
type sealed[T any] struct {
	Expires int64 `json:"exp"`
	Payload T     `json:"p"`
}

var errCookie = errors.New("invalid cookie")

// maxCookie bounds a cookie value stamen reads: browsers keep 4 KiB.
const maxCookie = 4096

func seal[T any](s *sealer, name string, v T, expires time.Time) (string, error) {
	plain, err := json.Marshal(sealed[T]{Expires: expires.Unix(), Payload: v})
	if err != nil {
		return "", err
	}
	nonce := make([]byte, s.aead.NonceSize(), s.aead.NonceSize()+len(plain)+s.aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	out := base64.RawURLEncoding.EncodeToString(s.aead.Seal(nonce, nonce, plain, []byte(name)))
	if len(out) > maxCookie {
		return "", errors.New("cookie value too long")
	}
	return out, nil
}

func open[T any](s *sealer, name, value string, now time.Time) (T, error) {
	var zero T
	if len(value) > maxCookie {
		return zero, errCookie
	}
	raw, err := base64.RawURLEncoding.Strict().DecodeString(value)
	if err != nil || len(raw) < s.aead.NonceSize() {
		return zero, errCookie
	}
	plain, err := s.aead.Open(nil, raw[:s.aead.NonceSize()], raw[s.aead.NonceSize():], []byte(name))
	if err != nil {
		return zero, errCookie
	}
	var v sealed[T]
	if json.Unmarshal(plain, &v) != nil {
		return zero, errCookie
	}
	if now.Unix() >= v.Expires {
		return zero, errors.New("cookie expired")
	}
	return v.Payload, nil
}
