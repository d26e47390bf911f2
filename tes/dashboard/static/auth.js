// The dashboard's access to the TES API: the user's bearer token (pasted,
// or from a login through the OIDC issuer with the authorization code flow
// and PKCE), or a user name and password (HTTP Basic) the page asks for in
// a dialog of its own. Either is kept in this tab only (sessionStorage) and
// sent by the page's own requests; one way at a time: signing in one way
// forgets the other. The browser never asks for or keeps a password: the
// page marks its requests, and the API's 401 to them has no Basic
// challenge. Auth.init gives it the page's helpers.
'use strict';
window.Auth = (function () {
  const TOKEN_KEY = 'tesk.dashboard.token';
  const LOGIN_KEY = 'tesk.dashboard.login';
  const BASIC_KEY = 'tesk.dashboard.basic';
  // A: the page's configuration and helpers (cfg, h, $, modal, problem,
  // banner, route).
  let A = null;
  // refused: the credentials of the user the API last refused (401).
  let refused = '';

  function init(app) { A = app; }
  function h() { return A.h.apply(null, arguments); }

  // has reports whether the API accepts a mode ("oidc", "basic").
  function has(mode) { return (A.cfg.auth || '').split(',').includes(mode); }

  // ---- tokens

  function token() { return sessionStorage.getItem(TOKEN_KEY) || ''; }
  function setToken(t) {
    if (t) {
      sessionStorage.setItem(TOKEN_KEY, t.trim());
      sessionStorage.removeItem(BASIC_KEY);
    } else sessionStorage.removeItem(TOKEN_KEY);
    render();
  }
  function claims(t) {
    try {
      const p = t.split('.')[1].replace(/-/g, '+').replace(/_/g, '/');
      return JSON.parse(decodeURIComponent(escape(atob(p + '==='.slice((p.length + 3) % 4)))));
    } catch (e) { return null; }
  }
  function expired(t) { return Boolean(t) && (claims(t) || {}).exp * 1000 < Date.now(); }

  // ---- user name and password

  // basic is the user signed in with a password: { user, credentials },
  // credentials being base64 of "user:password" in UTF-8; or null.
  function basic() {
    try {
      const b = JSON.parse(sessionStorage.getItem(BASIC_KEY) || 'null');
      return b && typeof b.user === 'string' && typeof b.credentials === 'string' ? b : null;
    } catch (e) { return null; }
  }
  function setBasic(user, password) {
    refused = '';
    if (user) {
      const bytes = new TextEncoder().encode(user + ':' + password);
      let s = '';
      bytes.forEach(b => { s += String.fromCharCode(b); });
      sessionStorage.setItem(BASIC_KEY, JSON.stringify({ user, credentials: btoa(s) }));
      sessionStorage.removeItem(TOKEN_KEY);
    } else sessionStorage.removeItem(BASIC_KEY);
    render();
  }

  // headers are the credentials of a request to the API: the token, else
  // the user name and password, else none.
  function headers() {
    const t = token();
    if (t) return { Authorization: 'Bearer ' + t };
    const b = basic();
    if (b) return { Authorization: 'Basic ' + b.credentials };
    return {};
  }

  function render() {
    const box = A.$('auth');
    if (!A.cfg) return;
    if (!has('oidc') && !has('basic')) {
      box.replaceChildren(h('span', { class: 'muted', id: 'auth-none' }, 'no access control'));
      return;
    }
    const t = token(), b = basic();
    const kids = [];
    if (t) {
      const c = claims(t) || {};
      const left = c.exp ? c.exp * 1000 - Date.now() : NaN;
      const who = c.preferred_username || c.email || c.sub || 'a token';
      kids.push(h('span', { id: 'auth-user' }, 'signed in as ', h('b', {}, who)));
      if (isFinite(left)) kids.push(left > 0 ? h('span', { class: 'muted' }, '· expires in ' + Timeline.duration(left / 1000)) : h('span', { class: 'expired' }, '· the token expired'));
      kids.push(h('button', { id: 'logout', onclick: () => { setToken(''); A.route(); } }, 'Log out'));
    } else if (b) {
      const no = b.credentials === refused;
      kids.push(h('span', { id: 'auth-user' }, no ? 'user ' : 'signed in as ', h('b', {}, b.user)));
      if (no) kids.push(h('span', { class: 'expired' }, '· not accepted'));
      kids.push(h('button', { id: 'sign-out', onclick: () => { setBasic(''); A.route(); } }, 'Sign out'));
    }
    if (has('oidc')) {
      if (!t || !(claims(t) || {}).exp || expired(t)) kids.push(h('button', { id: 'login', onclick: login }, 'Log in'));
      kids.push(h('button', { id: 'paste-token', onclick: pasteToken }, 'Paste a token'));
    }
    if (has('basic') && (!b || b.credentials === refused)) kids.push(h('button', { id: 'sign-in', onclick: signIn }, 'Sign in'));
    box.replaceChildren(...kids);
  }

  function pasteToken() {
    const ta = h('textarea', { id: 'token-input', placeholder: 'eyJhbGciOi…', spellcheck: 'false' });
    const close = A.modal(
      h('h3', {}, 'Paste a bearer token'),
      h('p', { class: 'muted' }, 'An ID token of ' + (A.cfg.issuer || 'the issuer') + ' for the audience ' + (A.cfg.client_id || '') + '. It is kept in this tab only.'),
      ta,
      h('div', { class: 'actions' },
        h('button', { onclick: () => close() }, 'Cancel'),
        h('button', { class: 'primary', id: 'token-use', onclick: () => { setToken(ta.value.replace(/^Bearer\s+/i, '')); close(); A.route(); } }, 'Use the token')));
    ta.focus();
  }

  // signIn asks for a user name and password (HTTP Basic).
  function signIn() {
    const user = h('input', { id: 'basic-user', name: 'username', autocomplete: 'username', spellcheck: 'false', value: (basic() || {}).user || '' });
    const password = h('input', { id: 'basic-password', name: 'password', type: 'password', autocomplete: 'current-password' });
    const note = h('p', { class: 'field-error', id: 'basic-error', role: 'alert' });
    let close = null;
    const form = h('form', { class: 'fields', id: 'basic-form', onsubmit: ev => {
      ev.preventDefault();
      if (!user.value) { note.textContent = 'Give a user name.'; user.focus(); return; }
      if (user.value.includes(':')) { note.textContent = 'A user name of HTTP Basic has no colon (:).'; user.focus(); return; }
      setBasic(user.value, password.value);
      close();
      A.route();
    } },
    h('label', {}, 'User name', user),
    h('label', {}, 'Password', password),
    note,
    h('div', { class: 'actions' },
      h('button', { type: 'button', id: 'basic-cancel', onclick: () => close() }, 'Cancel'),
      h('button', { type: 'submit', class: 'primary', id: 'basic-use' }, 'Sign in')));
    close = A.modal(
      h('h3', {}, 'Sign in'),
      h('p', { class: 'muted' }, 'A user of the TES API\'s users file. The user name and password are kept in this tab only, and sent with this page\'s requests to the API.'),
      form);
    (user.value ? password : user).focus();
  }

  // ---- OIDC: authorization code with PKCE

  function b64url(bytes) {
    let s = '';
    bytes.forEach(b => { s += String.fromCharCode(b); });
    return btoa(s).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
  }
  function random(n) { return b64url(crypto.getRandomValues(new Uint8Array(n))); }
  function redirectURI() { return location.origin + location.pathname.replace(/[^/]*$/, ''); }

  async function discovery() {
    const url = A.cfg.issuer.replace(/\/+$/, '') + '/.well-known/openid-configuration';
    let r;
    try { r = await fetch(url); } catch (e) { throw new Error('cannot reach ' + url + ' (' + e.message + ')'); }
    if (!r.ok) throw new Error(url + ' answered ' + r.status);
    return r.json();
  }

  async function login() {
    try {
      if (!window.crypto || !crypto.subtle) throw new Error('this page is not in a secure context (HTTPS or localhost): the browser offers no SHA-256 for PKCE');
      const d = await discovery();
      const verifier = random(32), state = random(16), nonce = random(16);
      const challenge = b64url(new Uint8Array(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(verifier))));
      sessionStorage.setItem(LOGIN_KEY, JSON.stringify({ verifier, state, nonce, back: location.hash || '#/', token_endpoint: d.token_endpoint }));
      const u = new URL(d.authorization_endpoint);
      const q = { response_type: 'code', client_id: A.cfg.client_id, redirect_uri: redirectURI(), scope: A.cfg.scopes || 'openid', state, nonce, code_challenge: challenge, code_challenge_method: 'S256' };
      for (const k in q) u.searchParams.set(k, q[k]);
      location.assign(u.toString());
    } catch (e) {
      A.banner(A.problem('Cannot log in', 'Logging in through ' + A.cfg.issuer + ' failed: ' + e.message));
    }
  }

  // finishLogin takes the authorization code the issuer sent back and
  // trades it for the tokens.
  async function finishLogin() {
    const q = new URLSearchParams(location.search);
    if (!q.has('code') && !q.has('error')) return;
    const saved = JSON.parse(sessionStorage.getItem(LOGIN_KEY) || 'null');
    sessionStorage.removeItem(LOGIN_KEY);
    history.replaceState(null, '', location.pathname + ((saved && saved.back) || '#/'));
    if (q.has('error')) throw new Error('the issuer refused the login: ' + q.get('error') + (q.get('error_description') ? ' (' + q.get('error_description') + ')' : ''));
    if (!saved || saved.state !== q.get('state')) throw new Error('the answer does not belong to a login this tab started; log in again');
    const body = new URLSearchParams({ grant_type: 'authorization_code', code: q.get('code'), redirect_uri: redirectURI(), client_id: A.cfg.client_id, code_verifier: saved.verifier });
    let r;
    try { r = await fetch(saved.token_endpoint, { method: 'POST', headers: { 'Content-Type': 'application/x-www-form-urlencoded' }, body }); } catch (e) { throw new Error('cannot reach the issuer\'s token endpoint (' + e.message + ')'); }
    const data = await r.json().catch(() => ({}));
    if (!r.ok) throw new Error('the issuer gave no token: ' + (data.error_description || data.error || r.status));
    if (!data.id_token) throw new Error('the issuer\'s answer has no ID token (is "openid" among the scopes?)');
    const c = claims(data.id_token);
    if (!c || c.nonce !== saved.nonce) throw new Error('the ID token is not the one this login asked for (its nonce differs)');
    setToken(data.id_token);
  }

  // unauthorized is the message of a 401: what was wrong and the ways to
  // sign in.
  function unauthorized(err) {
    const acts = [];
    if (has('oidc') && A.cfg.issuer) acts.push(['Log in', login, 'error-login']);
    if (has('oidc')) acts.push(['Paste a token', pasteToken, 'error-paste']);
    if (has('basic')) acts.push(['Sign in', signIn, 'error-sign-in']);
    const t = token(), b = basic();
    if (!t && b && b.credentials !== refused) { refused = b.credentials; render(); }
    const title = t ? (expired(t) ? 'Your token expired' : 'Your token is not accepted')
      : b ? 'Your user name or password is not accepted'
        : has('oidc') ? 'You are not logged in' : 'You are not signed in';
    const needs = has('oidc') && has('basic') ? 'a valid bearer token, or a user name and password' : has('basic') ? 'a valid user name and password' : 'a valid bearer token';
    return A.problem(title, 'The TES API needs ' + needs + ': ' + err.message, acts, 401);
  }

  return { init, has, headers, render, login, finishLogin, unauthorized };
})();
