// The page's connection to the daemon: the operator endpoint's JSON-RPC over /ui/ws,
// authenticated by the session cookie and the session's token (offered as the subprotocol
// `openphone-csrf.<token>`). Says `hello`, subscribes to every manifest event,
// reconnects with backoff, and goes back to the login page when the session has ended.
//
// The token comes once, in the login answer, and lives only in this origin's localStorage
// (scheme, host and port: another local web server's page has its own). The cookie alone is
// worth nothing — the browser sends it to every port of the host — so every request but the
// page itself carries the token, and a tab without it goes to the login page.

const TOKEN_KEY = 'openphone.dashboard.token';

/** Keeps the session's token (the login page, from the login answer). */
export function storeToken(token) { localStorage.setItem(TOKEN_KEY, token); }

/** The stored token, or null. */
export function storedToken() {
  try { return localStorage.getItem(TOKEN_KEY); } catch { return null; }
}

/** Forgets the token (logout, or the daemon refused it: 401/403). */
export function forgetToken() {
  try { localStorage.removeItem(TOKEN_KEY); } catch { /* storage unavailable */ }
}

/** The session is gone or the token is not its own: forget it and log in again. Once: a
 *  second navigation (the socket closing after a logout) would abort the first. */
let leaving = false;
export function toLogin() {
  forgetToken();
  if (leaving) return;
  leaving = true;
  location.replace('/ui/login');
}

export class Rpc {
  constructor() {
    this.ws = null;
    this.nextId = 1;
    this.pending = new Map();
    this.listeners = new Set();
    this.stateListeners = new Set();
    this.hello = null;
    this.connected = false;
    this.backoff = 500;
  }

  /** Calls `fn(event, payload)` for every event. */
  onEvent(fn) { this.listeners.add(fn); return () => this.listeners.delete(fn); }
  /** Calls `fn(connected)` when the connection opens (after `hello`) or closes. */
  onState(fn) { this.stateListeners.add(fn); return () => this.stateListeners.delete(fn); }

  async connect() {
    // The socket must offer the session's token as a subprotocol, or the daemon refuses the
    // upgrade. Read afresh on every attempt: a login in another tab replaces it.
    const token = storedToken();
    if (!token) { toLogin(); return; }
    const url = `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/ui/ws`;
    const ws = new WebSocket(url, ['openphone-dashboard', `openphone-csrf.${token}`]);
    this.ws = ws;
    ws.onopen = async () => {
      try {
        this.hello = await this.call('hello', {
          protocol: { min: 1, max: 1 },
          client: { name: 'openphone-dashboard', version: '1' },
        });
        await this.call('events.subscribe', { events: this.hello.manifests.events });
        this.connected = true;
        this.backoff = 500;
        this.stateListeners.forEach((fn) => fn(true));
      } catch (e) {
        console.error('hello failed', e);
        ws.close();
      }
    };
    ws.onmessage = (m) => {
      let msg;
      try { msg = JSON.parse(m.data); } catch { return; }
      if (msg.method === 'event' && msg.params) {
        this.listeners.forEach((fn) => {
          try { fn(msg.params.event, msg.params.payload); } catch (e) { console.error(e); }
        });
        return;
      }
      const p = this.pending.get(msg.id);
      if (!p) return;
      this.pending.delete(msg.id);
      if (msg.error) {
        const err = new Error(msg.error.message);
        err.code = msg.error.data && msg.error.data.code;
        err.retryAfterMs = msg.error.data && msg.error.data.retry_after_ms;
        p.reject(err);
      } else {
        p.resolve(msg.result);
      }
    };
    ws.onclose = async (ev) => {
      const was = this.connected;
      this.connected = false;
      for (const p of this.pending.values()) p.reject(new Error('connection closed'));
      this.pending.clear();
      if (was) this.stateListeners.forEach((fn) => fn(false));
      // The session ended (logout, expiry) or was never valid: back to the login page.
      if (ev.code === 1008 || !(await sessionAlive())) {
        toLogin();
        return;
      }
      setTimeout(() => this.connect(), this.backoff);
      this.backoff = Math.min(this.backoff * 2, 10000);
    };
  }

  /** Calls a method; resolves with its result, rejects with an Error carrying `code`. A
   *  `rate_limited` answer is retried (up to three times) after the wait it names. */
  async call(method, params = {}) {
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.callOnce(method, params);
      } catch (e) {
        if (e.code !== 'rate_limited' || attempt >= 3) throw e;
        await new Promise((r) => setTimeout(r, Math.min(e.retryAfterMs || 250, 5000)));
      }
    }
  }

  callOnce(method, params) {
    return new Promise((resolve, reject) => {
      if (!this.ws || this.ws.readyState !== WebSocket.OPEN) {
        reject(new Error('not connected to the daemon'));
        return;
      }
      const id = this.nextId++;
      this.pending.set(id, { resolve, reject });
      this.ws.send(JSON.stringify({ jsonrpc: '2.0', id, method, params }));
    });
  }
}

/** Whether the session (cookie and token) still works. */
export async function sessionAlive() {
  const token = storedToken();
  if (!token) return false;
  try {
    const r = await fetch('/ui/api/session', { credentials: 'same-origin', headers: { 'X-OpenPhone-CSRF': token } });
    // 401: no session (logout, expiry, a restarted daemon); 403: not this session's token.
    return r.status !== 401 && r.status !== 403;
  } catch {
    // The daemon is unreachable: keep the page and retry.
    return true;
  }
}

/** The headers every dashboard API request carries: the session's token. Without a stored
 *  token the tab goes to the login page. */
function tokenHeaders() {
  const token = storedToken();
  if (!token) {
    toLogin();
    throw new Error('not logged in');
  }
  return { 'X-OpenPhone-CSRF': token };
}

/** Refused for the session (401) or the token (403): forget it and log in again. */
async function checked(r) {
  if (r.status === 401 || r.status === 403) {
    toLogin();
    throw new Error(`${r.status}: ${await r.text()}`);
  }
  if (!r.ok) throw new Error(`${r.status}: ${await r.text()}`);
  return r.json();
}

/** A read from the dashboard's own API routes, with the session's token. */
export async function get(path) {
  const r = await fetch(path, { credentials: 'same-origin', headers: tokenHeaders() });
  return checked(r);
}

/** A state-changing POST to the dashboard's own routes, with the session's token. */
export async function post(path, body = {}) {
  const r = await fetch(path, {
    method: 'POST',
    credentials: 'same-origin',
    headers: { 'Content-Type': 'application/json', ...tokenHeaders() },
    body: JSON.stringify(body),
  });
  return checked(r);
}
