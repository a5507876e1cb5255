// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package standin

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"time"
)

// claims are the claims of Infrahub's JWTs.
type claims struct {
	Sub       string `json:"sub"`
	Iat       int64  `json:"iat"`
	Nbf       int64  `json:"nbf"`
	Exp       int64  `json:"exp"`
	Fresh     bool   `json:"fresh"`
	Type      string `json:"type"`
	SessionID string `json:"session_id,omitempty"`
}

var jwtHeader = base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`))

// sign returns c as an HS256 JWT with the current secret. s.mu is held.
func (s *Server) sign(c claims) string {
	payload, _ := json.Marshal(c)
	unsigned := jwtHeader + "." + base64.RawURLEncoding.EncodeToString(payload)
	mac := hmac.New(sha256.New, s.secret)
	mac.Write([]byte(unsigned))
	return unsigned + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// verify checks a JWT as PyJWT does: the signature first ("Invalid
// token"), then the expiry ("Expired Signature"). s.mu is held.
func (s *Server) verify(token, typ string) (claims, string) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return claims{}, "Invalid token"
	}
	mac := hmac.New(sha256.New, s.secret)
	mac.Write([]byte(parts[0] + "." + parts[1]))
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil || !hmac.Equal(sig, mac.Sum(nil)) {
		return claims{}, "Invalid token"
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	var c claims
	if err != nil || json.Unmarshal(payload, &c) != nil {
		return claims{}, "Invalid token"
	}
	if s.now().Unix() >= c.Exp {
		return claims{}, "Expired Signature"
	}
	if c.Type != typ {
		return claims{}, "Invalid token"
	}
	return c, ""
}

// issue returns a new access token of a session. s.mu is held.
func (s *Server) issue(user, session string) string {
	now := s.now()
	return s.sign(claims{Sub: user, Iat: now.Unix(), Nbf: now.Unix(), Exp: now.Add(s.accessLifetime).Unix(), Type: "access", SessionID: session})
}

// identify authenticates r as Infrahub does: X-INFRAHUB-KEY wins over a
// bearer JWT; without either, a GET passes anonymously (unless
// DenyAnonymous) and anything else is forbidden. It writes the refusal and
// returns false.
func (s *Server) identify(w http.ResponseWriter, r *http.Request) bool {
	s.mu.Lock()
	status, msg := s.authenticate(r)
	s.mu.Unlock()
	if status != 0 {
		writeError(w, status, msg)
		return false
	}
	return true
}

func (s *Server) authenticate(r *http.Request) (int, string) {
	if key := r.Header.Get("X-INFRAHUB-KEY"); key != "" {
		if s.tokens[key] {
			return 0, ""
		}
		return http.StatusUnauthorized, "Invalid token"
	}
	if token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		if _, msg := s.verify(token, "access"); msg != "" {
			return http.StatusUnauthorized, msg
		}
		return 0, ""
	}
	switch {
	case r.Method != http.MethodGet:
		return http.StatusForbidden, "You are not allowed to perform this operation"
	case s.opts.DenyAnonymous:
		return http.StatusUnauthorized, "Authentication is required"
	}
	return 0, ""
}

// maxBody bounds what the stand-in reads of a request's body.
const maxBody = 1 << 20

// login answers POST /api/auth/login.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Username *string `json:"username"`
		Password *string `json:"password"`
	}
	raw, _ := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err := json.Unmarshal(raw, &body); err != nil {
		writeValidation(w, nil, "JSON decode error")
		return
	}
	switch {
	case body.Username == nil:
		writeValidation(w, []string{"username"}, "Field required")
		return
	case body.Password == nil:
		writeValidation(w, []string{"password"}, "Field required")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	want, ok := s.users[*body.Username]
	switch {
	case !ok:
		writeError(w, http.StatusNotFound, "Unable to find the account "+*body.Username)
		return
	case want != *body.Password:
		writeError(w, http.StatusUnauthorized, "Incorrect password")
		return
	}
	session := newID()
	s.sessions[session] = *body.Username
	now := s.now()
	access := s.issue(*body.Username, session)
	refresh := s.sign(claims{Sub: *body.Username, Iat: now.Unix(), Nbf: now.Unix(), Exp: now.Add(s.opts.RefreshLifetime).Unix(), Type: "refresh", SessionID: session})
	http.SetCookie(w, &http.Cookie{Name: "access_token", Value: access, HttpOnly: true, Path: "/", Expires: now.Add(s.accessLifetime)})
	http.SetCookie(w, &http.Cookie{Name: "refresh_token", Value: refresh, HttpOnly: true, Path: "/", Expires: now.Add(s.opts.RefreshLifetime)})
	writeJSON(w, http.StatusOK, map[string]string{"access_token": access, "refresh_token": refresh})
}

// refresh answers POST /api/auth/refresh: a new access token for a live
// session; the refresh token is not rotated.
func (s *Server) refresh(w http.ResponseWriter, r *http.Request) {
	token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	s.mu.Lock()
	defer s.mu.Unlock()
	c, msg := s.verify(token, "refresh")
	if msg != "" {
		writeError(w, http.StatusUnauthorized, msg)
		return
	}
	if _, ok := s.sessions[c.SessionID]; !ok {
		writeError(w, http.StatusUnauthorized, "Invalid token")
		return
	}
	access := s.issue(c.Sub, c.SessionID)
	http.SetCookie(w, &http.Cookie{Name: "access_token", Value: access, HttpOnly: true, Path: "/", Expires: s.now().Add(s.accessLifetime)})
	writeJSON(w, http.StatusOK, map[string]string{"access_token": access})
}

// logout answers POST /api/auth/logout: the session ends.
func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	s.mu.Lock()
	defer s.mu.Unlock()
	c, msg := s.verify(token, "access")
	if msg != "" {
		writeError(w, http.StatusUnauthorized, msg)
		return
	}
	delete(s.sessions, c.SessionID)
	writeJSON(w, http.StatusOK, map[string]any{})
}

// Sessions returns the number of live logins: Infrahub keeps a node in its
// database for each, for the refresh lifetime.
func (s *Server) Sessions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sessions)
}

// AddUser adds (or changes the password of) an account that logs in.
func (s *Server) AddUser(username, password string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.users[username] = password
}

// AddToken adds an API token, sent as X-INFRAHUB-KEY.
func (s *Server) AddToken(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tokens[token] = true
}

// RotateSecret changes the signing key: every token issued before is
// refused with 401 "Invalid token", as after a restart of Infrahub without
// a fixed secret key. The sessions stay, as their nodes stay in Infrahub's
// database.
func (s *Server) RotateSecret() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.secret = randomBytes(32)
}

// SetAccessLifetime changes the life of the access tokens issued from now on.
func (s *Server) SetAccessLifetime(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.accessLifetime = d
}
