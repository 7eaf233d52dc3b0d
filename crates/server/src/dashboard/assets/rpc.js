// The page's connection to the daemon: the operator endpoint's JSON-RPC over /ui/ws,
// authenticated by the session cookie and the session's token (offered as the subprotocol
// `openphone-csrf.<token>`). Says `hello`, subscribes to every manifest event,
// reconnects with backoff, and goes back to the login page when the session has ended.

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
    // upgrade: only a page of the dashboard's own origin can read it.
    let token;
    try {
      token = await sessionToken();
    } catch (e) {
      if (e.status === 401) { location.replace('/ui/login'); return; }
      setTimeout(() => this.connect(), this.backoff);
      this.backoff = Math.min(this.backoff * 2, 10000);
      return;
    }
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
        location.replace('/ui/login');
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

/** Whether the session cookie still works. */
export async function sessionAlive() {
  try {
    const r = await fetch('/ui/api/session', { credentials: 'same-origin' });
    return r.ok;
  } catch {
    // The daemon is unreachable: keep the page and retry.
    return true;
  }
}

let csrf = null;

/** The session's CSRF token (`GET /ui/api/session`, same origin only); rejects with an Error
 *  carrying `status` when the session is gone. */
async function sessionToken() {
  if (!csrf) {
    const r = await fetch('/ui/api/session', { credentials: 'same-origin' });
    if (!r.ok) {
      const err = new Error(`session: ${r.status}`);
      err.status = r.status;
      throw err;
    }
    csrf = (await r.json()).csrf;
  }
  return csrf;
}

/** A state-changing POST to the dashboard's own routes, with the session's CSRF token. */
export async function post(path, body = {}) {
  await sessionToken();
  const r = await fetch(path, {
    method: 'POST',
    credentials: 'same-origin',
    headers: { 'Content-Type': 'application/json', 'X-OpenPhone-CSRF': csrf },
    body: JSON.stringify(body),
  });
  if (!r.ok) throw new Error(`${r.status}: ${await r.text()}`);
  return r.json();
}
