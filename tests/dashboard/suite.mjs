// The dashboard in a real browser: a real `openphone serve` on a temp data dir, a scripted
// runtime (a WebSocket client speaking the endpoint protocol with its configured token) and
// the system Chromium driven by playwright-core. Run by run.sh (which builds the binary).
//
// Screenshots of every page at desktop and phone sizes go to $SHOTS (default
// .cache/dashboard-shots/ in the repo root), each checked for visible content.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http_ from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { chromium } from 'playwright-core';

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');
const BIN = process.env.OPENPHONE_BIN || path.join(ROOT, 'target/debug/openphone');
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const SHOTS = process.env.SHOTS || path.join(ROOT, '.cache/dashboard-shots');
const RUNTIME_TOKEN = 'hermes-dashboard-token-0123456789';
const PAGES = ['confirmations', 'runtimes', 'sessions', 'ask', 'phone', 'audit', 'jobs', 'goals'];
const SIZES = { desktop: { width: 1280, height: 800 }, phone: { width: 390, height: 844 } };

let dir; let daemon; let base; let browser; let context; let page; let runtime;

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function waitFor(what, fn, ms = 15000) {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

/** The scripted runtime: hello with its token, subscriptions, calls and an event log. */
class Runtime {
  constructor(url) { this.url = url; this.id = 0; this.pending = new Map(); this.events = []; }
  async open() {
    this.ws = new WebSocket(this.url);
    this.ws.onmessage = (m) => {
      const msg = JSON.parse(m.data);
      if (msg.method === 'event') { this.events.push(msg.params); return; }
      const p = this.pending.get(msg.id);
      if (p) { this.pending.delete(msg.id); p(msg); }
    };
    await new Promise((res, rej) => { this.ws.onopen = res; this.ws.onerror = rej; });
    const hello = await this.call('hello', { protocol: { min: 1, max: 1 }, client: { name: 'scripted-runtime', version: '1' }, token: RUNTIME_TOKEN });
    assert.equal(hello.result.role, 'runtime');
    await this.call('events.subscribe', { events: ['runtime.tool.result', 'runtime.confirmation.resolved', 'runtime.attention.requested'] });
  }
  call(method, params) {
    const id = ++this.id;
    this.ws.send(JSON.stringify({ jsonrpc: '2.0', id, method, params }));
    return new Promise((res) => this.pending.set(id, res));
  }
  toolResults(requestId) { return this.events.filter((e) => e.event === 'runtime.tool.result' && e.payload.request_id === requestId); }
  close() { this.ws.close(); }
}

/** One raw HTTP/1.1 request to the daemon from outside the browser (for the refusals: any
 *  header, Host and Upgrade included); resolves with the status and the body. */
function http(pathname, { method = 'GET', headers = {}, body = '' } = {}) {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const sock = net.connect(Number(port), hostname);
    let raw = '';
    sock.on('data', (d) => { raw += d; });
    sock.on('error', reject);
    sock.on('close', () => {
      const [head, ...rest] = raw.split('\r\n\r\n');
      resolve({ status: Number(head.split(' ')[1]), text: rest.join('\r\n\r\n') });
    });
    const lower = Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v]));
    if (!lower.host) lower.host = `${hostname}:${port}`;
    if (!lower.connection) lower.connection = 'close';
    lower['content-length'] = Buffer.byteLength(body);
    const lines = Object.entries(lower).map(([k, v]) => `${k}: ${v}`).join('\r\n');
    sock.write(`${method} ${pathname} HTTP/1.1\r\n${lines}\r\n\r\n${body}`);
    // An upgrade refused or not, the answer is in once the status line is.
    setTimeout(() => sock.end(), 2000);
  });
}

async function loginLink() {
  const out = execFileSync(BIN, ['dashboard', '--data-dir', dir, '--json'], { encoding: 'utf8' });
  return JSON.parse(out).url;
}

before(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'openphone-dashboard-'));
  const config = path.join(dir, 'config.toml');
  fs.writeFileSync(config, `[[runtimes]]\nid = "hermes"\ntoken = "${RUNTIME_TOKEN}"\ngrants = ["safe_read", "private_read", "dangerous"]\n`);
  daemon = spawn(BIN, ['serve', '--data-dir', dir, '--listen', '127.0.0.1:0', '--config', config], { stdio: ['ignore', 'inherit', 'pipe'] });
  let log = '';
  daemon.stderr.on('data', (d) => { log += d; });
  daemon.on('exit', (code) => { if (code) console.error(`daemon exited ${code}\n${log}`); });
  const info = await waitFor('endpoint.json', () => {
    try { return JSON.parse(fs.readFileSync(path.join(dir, 'endpoint.json'), 'utf8')); } catch { return null; }
  });
  base = info.url.replace(/^ws:/, 'http:').replace(/\/v1\/runtime$/, '');
  runtime = new Runtime(info.url);
  await runtime.open();
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync'],
  });
  context = await browser.newContext({ viewport: SIZES.desktop });
  page = await context.newPage();
  page.on('pageerror', (e) => console.error('page error:', e));
  fs.mkdirSync(SHOTS, { recursive: true });
});

after(async () => {
  if (runtime) runtime.close();
  if (browser) await browser.close();
  if (daemon) { daemon.kill('SIGTERM'); await new Promise((r) => daemon.once('exit', r)); }
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

test('without a session the dashboard refuses, and a login link works once', async () => {
  assert.equal((await http('/ui/api/session')).status, 401);
  assert.equal((await http('/ui/api/methods')).status, 401);
  const first = await http('/ui/');
  assert.equal(first.status, 303, 'the page redirects to the login page without a session');
  // A code from elsewhere, or a login without an Origin, is refused.
  assert.equal((await http('/ui/login', { method: 'POST', headers: { 'content-type': 'application/json', origin: base }, body: '{"code":"nope"}' })).status, 401);
  const link = await loginLink();
  const code = new URL(link).hash.slice('#code='.length);
  assert.equal((await http('/ui/login', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ code }) })).status, 403);

  await page.goto(link);
  await page.waitForURL(`${base}/ui/`);
  await page.locator('#pill-daemon .value', { hasText: 'connected' }).waitFor();
  // The code is gone from the history entry and works only once.
  assert.ok(!page.url().includes('code'));
  const again = await context.newPage();
  await again.goto(link);
  await again.locator('#login-status', { hasText: 'refused' }).waitFor();
  await again.close();

  const cookies = await context.cookies(`${base}/ui/`);
  const session = cookies.find((c) => c.name === 'openphone_dashboard');
  assert.ok(session, 'a session cookie');
  assert.equal(session.httpOnly, true);
  assert.equal(session.sameSite, 'Strict');
  assert.equal(session.path, '/ui');
  const cookie = `openphone_dashboard=${session.value}`;
  // The session's token came with the login answer and lives in the origin's localStorage,
  // never in a cookie.
  const token = await page.evaluate(() => localStorage.getItem('openphone.dashboard.token'));
  assert.match(token || '', /^[0-9a-f]{64}$/);
  assert.ok(!cookies.some((c) => c.value.includes(token)), 'the token is in no cookie');
  // The cookie alone reads nothing; with the token reads work; a foreign Origin is refused; a
  // POST needs the token too.
  assert.equal((await http('/ui/api/methods', { headers: { cookie } })).status, 403);
  assert.equal((await http('/ui/api/session', { headers: { cookie } })).status, 403);
  assert.equal((await http('/ui/api/methods', { headers: { cookie, 'x-openphone-csrf': token } })).status, 200);
  assert.equal((await http('/ui/api/methods', { headers: { cookie, 'x-openphone-csrf': token, origin: 'https://evil.example' } })).status, 403);
  assert.equal((await http('/ui/api/audit/verify', { method: 'POST', headers: { cookie, origin: base, 'content-type': 'application/json' }, body: '{}' })).status, 403);
  assert.equal((await http('/ui/ws', { headers: { cookie, origin: 'https://evil.example', connection: 'Upgrade', upgrade: 'websocket', 'sec-websocket-version': '13', 'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==' } })).status, 403);
  assert.equal((await http('/ui/api/methods', { headers: { cookie, host: 'evil.example' } })).status, 403);
});

/** The centre of the element whose text is `label` on the phone's screen, via the runtime. */
async function centreOf(label) {
  const r = await runtime.call('tools.invoke', { request_id: `look-${Date.now()}`, tool: 'openphone.screen.get', params: { include_ui_tree: false }, reason: "find the element to tap" });
  assert.equal(r.result.status, 'ok', JSON.stringify(r));
  const el = r.result.result.interactive_elements.find((e) => JSON.stringify(e).includes(label));
  assert.ok(el, `no element ${label} on ${JSON.stringify(r.result.result.interactive_elements).slice(0, 400)}`);
  return el.center;
}

test('a parked tap appears live, Approve runs it once, the phone and the audit show it', async () => {
  await page.goto(`${base}/ui/#/phone`);
  await page.locator('#phone-info', { hasText: 'captured' }).waitFor();
  const before = await page.locator('#phone-shot').getAttribute('src');
  const infoBefore = await page.locator('#phone-info').textContent();

  await page.goto(`${base}/ui/#/confirmations`);
  await page.locator('#no-confirmations').waitFor();
  const { x, y } = await centreOf('Messages');
  const call = runtime.call('tools.invoke', { request_id: 'tap-approve', tool: 'openphone.ui.tap', params: { x, y, reason: 'open Messages' }, wait: false });
  const parked = await call;
  assert.equal(parked.result.status, 'needs_confirmation');
  // Live: no reload.
  const card = page.locator('article.confirmation');
  await card.waitFor();
  assert.match(await card.textContent(), /openphone\.ui\.tap/);
  assert.match(await card.textContent(), /hermes/);
  await page.locator('#pill-confirmations .value', { hasText: '1 confirmation' }).waitFor();
  await card.getByRole('button', { name: 'Approve', exact: true }).click();
  await page.locator('#confirmation-outcome', { hasText: 'approved — result ok' }).waitFor();
  await waitFor('the runtime\'s result', () => runtime.toolResults('tap-approve').length === 1);
  assert.equal(runtime.toolResults('tap-approve')[0].payload.status, 'ok');
  await page.locator('#no-confirmations').waitFor();

  // The phone shows the effect: another screen than before.
  await page.goto(`${base}/ui/#/phone`);
  await page.locator('#phone-info', { hasText: 'captured' }).waitFor();
  await waitFor('a new screenshot', async () => (await page.locator('#phone-shot').getAttribute('src')) !== before);
  assert.notEqual(await page.locator('#phone-info').textContent(), infoBefore);
  assert.match(await page.locator('#phone-tree').textContent(), /Messages|Conversation|messag/i);

  // The audit page shows the records; the tap ran once.
  await page.goto(`${base}/ui/#/audit`);
  await page.fill('#audit-tool', 'openphone.ui.tap');
  await page.click('form button[type=submit]');
  await page.locator('#audit-table tbody tr').first().waitFor();
  // Columns: seq, time, kind, runtime, tool, decision, confirmation, status, error.
  const rows = await page.locator('#audit-table tbody tr')
    .evaluateAll((trs) => trs.map((tr) => [...tr.cells].map((c) => c.textContent.trim())));
  const shown = rows.map((r) => r.join(' | ')).join('\n');
  const count = (kind, confirmation, status) => rows.filter((r) => r[2] === kind && r[6] === confirmation && r[7] === status).length;
  // One request parked, approved, and completed once.
  assert.equal(count('tool_request', 'pending', 'needs_confirmation'), 1, shown);
  assert.equal(count('confirmation_transition', 'approved', '–'), 1, shown);
  assert.equal(count('confirmation_transition', 'completed', 'ok'), 1, shown);
  // Still only one result for the request.
  assert.equal(runtime.toolResults('tap-approve').length, 1);
});

test('Deny: the runtime gets the denial', async () => {
  await page.goto(`${base}/ui/#/confirmations`);
  await page.locator('#no-confirmations').waitFor();
  const answer = runtime.call('tools.invoke', { request_id: 'tap-deny', tool: 'openphone.ui.tap', params: { x: 10, y: 10, reason: 'poke the corner' } });
  const card = page.locator('article.confirmation');
  await card.waitFor();
  await card.getByRole('button', { name: 'Deny' }).click();
  const r = await answer;
  assert.equal(r.result.status, 'denied');
  assert.equal(r.result.error.code, 'user_denied_confirmation');
  await page.locator('#no-confirmations').waitFor();
});

/** Another local web server on a second loopback port (a dev server, a notebook, an agent's own
 *  web UI): it serves one page, and keeps the `Cookie` headers its requests bring (cookies
 *  are not separated by port: a fetch of its own `/ui/…` carries the dashboard's cookie).
 *  Resolves with its origin, the captured cookies and a close function. */
async function otherLocalServer() {
  const cookies = [];
  const server = http_.createServer((req, res) => {
    if (req.headers.cookie) cookies.push({ path: req.url, cookie: req.headers.cookie });
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    res.end('<!doctype html><title>another local page</title><p>hello</p>');
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return { origin: `http://127.0.0.1:${server.address().port}`, cookies, close: () => new Promise((r) => server.close(r)) };
}

// Issue 28, item 1: a page served by another local web server, in the browser where the user
// is logged in, opened ws://127.0.0.1:<daemon>/ui/ws (SameSite=Strict does not separate
// ports), got role=operator, approved a pending call and minted a login code.
test('a page on another loopback port cannot act as the operator, the dashboard still can', async () => {
  const other = await otherLocalServer();
  const evil = await context.newPage();
  try {
    // Something it would approve: a parked tap.
    const parked = await runtime.call('tools.invoke', { request_id: 'tap-foreign', tool: 'openphone.ui.tap', params: { x: 30, y: 30, reason: 'foreign page test' }, wait: false });
    assert.equal(parked.result.status, 'needs_confirmation');
    const confirmationId = parked.result.result.confirmation_id;
    assert.ok(confirmationId, JSON.stringify(parked));
    await evil.goto(`${other.origin}/`);
    // The browser holds the dashboard's cookie for this site: the attack has what it needs
    // but the origin.
    assert.ok((await context.cookies(`${base}/ui/`)).some((c) => c.name === 'openphone_dashboard'));
    const outcome = await evil.evaluate(async ({ base, confirmationId }) => {
      const wsUrl = `${base.replace(/^http/, 'ws')}/ui/ws`;
      const attempt = (protocols) => new Promise((resolve) => {
        const log = { opened: false, answers: [] };
        let ws;
        try { ws = protocols ? new WebSocket(wsUrl, protocols) : new WebSocket(wsUrl); } catch (e) { resolve({ ...log, thrown: String(e) }); return; }
        let id = 0;
        const call = (method, params) => ws.send(JSON.stringify({ jsonrpc: '2.0', id: ++id, method, params }));
        ws.onopen = () => {
          log.opened = true;
          call('hello', { protocol: { min: 1, max: 1 }, client: { name: 'not-the-dashboard', version: '1' } });
          call('confirmations.list', {});
          if (confirmationId) call('confirmations.resolve', { confirmation_id: confirmationId, decision: 'approve' });
          call('dashboard.login', {});
        };
        ws.onmessage = (m) => log.answers.push(m.data);
        ws.onclose = (ev) => resolve({ ...log, code: ev.code });
        setTimeout(() => { try { ws.close(); } catch { /* closed */ } resolve(log); }, 3000);
      });
      const plain = await attempt(null);
      const guessed = await attempt(['openphone-dashboard', 'openphone-csrf.0000']);
      let read;
      try {
        const r = await fetch(`${base}/ui/api/session`, { credentials: 'include' });
        read = `status ${r.status}: ${await r.text()}`;
      } catch (e) { read = `failed: ${e}`; }
      // Its own origin's /ui/…: the browser sends the dashboard's cookie to this server.
      let own;
      try { own = (await fetch('/ui/x', { credentials: 'include' })).status; } catch (e) { own = `failed: ${e}`; }
      return { plain, guessed, read, own, stored: localStorage.getItem('openphone.dashboard.token') };
    }, { base, confirmationId });
    assert.equal(outcome.plain.opened, false, JSON.stringify(outcome.plain));
    assert.deepEqual(outcome.plain.answers, []);
    assert.equal(outcome.guessed.opened, false, JSON.stringify(outcome.guessed));
    assert.deepEqual(outcome.guessed.answers, []);
    assert.match(outcome.read, /^failed/, 'the session token is not readable from another origin');
    assert.equal(outcome.stored, null, 'the token is in the dashboard origin\'s storage only');
    // The other server did receive the cookie (the hole this closes) ...
    assert.equal(outcome.own, 200);
    const leaked = other.cookies.find((c) => c.path === '/ui/x' && c.cookie.includes('openphone_dashboard='));
    assert.ok(leaked, `the other server got no cookie: ${JSON.stringify(other.cookies)}`);
    // ... and from outside the browser (no Origin, no Sec-Fetch-*) it buys nothing with it: no
    // token from the session route, no socket with a forged own Origin.
    const cookie = leaked.cookie;
    const session = await http('/ui/api/session', { headers: { cookie } });
    assert.equal(session.status, 403, session.text);
    assert.doesNotMatch(session.text, /[0-9a-f]{64}/);
    assert.equal((await http('/ui/api/methods', { headers: { cookie } })).status, 403);
    assert.equal((await http('/ui/api/audit/verify', { method: 'POST', headers: { cookie, origin: base, 'content-type': 'application/json' }, body: '{}' })).status, 403);
    const upgrade = { cookie, origin: base, connection: 'Upgrade', upgrade: 'websocket', 'sec-websocket-version': '13', 'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==' };
    assert.equal((await http('/ui/ws', { headers: upgrade })).status, 403);
    assert.equal((await http('/ui/ws', { headers: { ...upgrade, 'sec-websocket-protocol': 'openphone-dashboard' } })).status, 403);
    assert.equal((await http('/ui/ws', { headers: { ...upgrade, 'sec-websocket-protocol': `openphone-dashboard, openphone-csrf.${'0'.repeat(64)}` } })).status, 403);
    // Nothing ran: the dashboard's own page still shows the tap waiting, and can deny it.
    await page.goto(`${base}/ui/#/confirmations`);
    await page.locator('#pill-daemon .value', { hasText: 'connected' }).waitFor();
    const card = page.locator('article.confirmation', { hasText: 'openphone.ui.tap' });
    await card.waitFor();
    assert.equal(runtime.toolResults('tap-foreign').length, 0, 'the foreign page approved nothing');
    await card.getByRole('button', { name: 'Deny' }).click();
    await waitFor('the denial', () => runtime.toolResults('tap-foreign').length === 1);
    assert.equal(runtime.toolResults('tap-foreign')[0].payload.status, 'denied');
    await page.locator('#no-confirmations').waitFor();
  } finally {
    await evil.close();
    await other.close();
  }
});

test('verify reports an intact chain, then a tampered database', async () => {
  await page.goto(`${base}/ui/#/audit`);
  await page.click('#audit-verify');
  await page.locator('#verify-result', { hasText: 'Chain intact' }).waitFor();
  execFileSync('python3', ['-c', `import sqlite3,sys
c=sqlite3.connect(sys.argv[1]); c.execute("UPDATE audit_records SET request_id = 'forged' WHERE seq = 2"); c.commit()`, path.join(dir, 'openphone.db')]);
  await page.click('#audit-verify');
  await page.locator('#verify-result', { hasText: 'BROKEN' }).waitFor();
  assert.match(await page.locator('#verify-result').textContent(), /seq 2/);
});

test('the ask box reaches the runtime and its reply streams into the page and the session', async () => {
  await page.goto(`${base}/ui/#/ask`);
  await page.getByLabel('What to ask').fill('What is next on my calendar?');
  await page.getByLabel('Runtime').selectOption('hermes');
  await page.getByRole('button', { name: 'Ask' }).click();
  const asked = await waitFor('the attention request', () => runtime.events.find((e) => e.event === 'runtime.attention.requested'));
  assert.equal(asked.payload.text, 'What is next on my calendar?');
  const id = asked.payload.phone_session_id;
  await runtime.call('runtime.message', { phone_session_id: id, text: 'Lunch with ', final: false });
  await page.locator('#ask-transcript', { hasText: 'Lunch with' }).waitFor();
  await runtime.call('runtime.message', { phone_session_id: id, text: 'Lunch with Sam at 12:30', final: true });
  await page.locator('#ask-transcript', { hasText: 'Lunch with Sam at 12:30' }).waitFor();
  await page.getByRole('link', { name: 'open the session' }).click();
  await page.locator('#session-detail', { hasText: 'completed' }).waitFor();
  assert.match(await page.locator('#transcript').textContent(), /Lunch with Sam at 12:30/);
  assert.match(await page.locator('#session-list').textContent(), /What is next on my calendar\?/);
});

test('a job created on the jobs page can be opened and stopped', async () => {
  await page.goto(`${base}/ui/#/jobs`);
  await page.getByLabel('Title').fill('Dashboard test job');
  await page.getByLabel('Start in (minutes)').fill('60');
  await page.getByLabel('Prompt').fill('Check the weather');
  await page.getByRole('button', { name: 'Create job' }).click();
  const link = page.getByRole('link', { name: /Dashboard test job/ });
  await link.waitFor();
  await link.click();
  const detail = page.locator('#job-detail');
  await detail.locator('h3', { hasText: 'Dashboard test job' }).waitFor();
  assert.match(await detail.textContent(), /queued/);
  await detail.getByRole('button', { name: 'Pause' }).click();
  await detail.locator('.badge', { hasText: 'paused' }).waitFor();
  await detail.getByRole('button', { name: 'Stop' }).click();
  await detail.locator('.badge', { hasText: 'stopped' }).waitFor();
});

test('every page at desktop and phone sizes has visible content', async () => {
  // Something for the lists to show: a job and a pending confirmation.
  await runtime.call('tools.invoke', { request_id: 'tap-shot', tool: 'openphone.ui.tap', params: { x: 20, y: 20, reason: 'for the screenshot' }, wait: false });
  const written = [];
  for (const [size, viewport] of Object.entries(SIZES)) {
    await page.setViewportSize(viewport);
    for (const name of PAGES) {
      await page.goto(`${base}/ui/#/${name}`);
      await page.locator('#pill-daemon .value', { hasText: 'connected' }).waitFor();
      await page.locator('main h2').waitFor();
      await sleep(300);
      const text = (await page.locator('main').innerText()).trim();
      assert.ok(text.length > 20, `${name} at ${size} shows little: ${text}`);
      const box = await page.locator('main').boundingBox();
      assert.ok(box && box.width > 200 && box.height > 50, `${name} at ${size}: main is ${JSON.stringify(box)}`);
      // Nothing wider than the viewport (usable on a phone).
      const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
      assert.ok(overflow <= 1, `${name} at ${size} scrolls sideways by ${overflow}px`);
      const file = path.join(SHOTS, `${name}-${size}.png`);
      await page.screenshot({ path: file, fullPage: true });
      assert.ok(fs.statSync(file).size > 8000, `${file} looks blank`);
      written.push(file);
    }
  }
  if (PAGES.includes('goals')) {
    await page.goto(`${base}/ui/#/goals`);
    const methods = JSON.parse((await page.evaluate(() => fetch('/ui/api/methods', { headers: { 'X-OpenPhone-CSRF': localStorage.getItem('openphone.dashboard.token') } }).then((r) => r.text()))));
    if (!methods.methods.some((m) => m.startsWith('goals.'))) await page.locator('#goals-unavailable').waitFor();
  }
  console.log(`screenshots:\n${written.join('\n')}`);
});

test('a tab with the cookie but no stored token goes to the login page', async () => {
  await page.setViewportSize(SIZES.desktop);
  const token = await page.evaluate(() => localStorage.getItem('openphone.dashboard.token'));
  assert.ok(token);
  await page.evaluate(() => localStorage.removeItem('openphone.dashboard.token'));
  const tab = await context.newPage();
  try {
    await tab.goto(`${base}/ui/#/confirmations`);
    await tab.waitForURL(`${base}/ui/login`);
    await tab.locator('#login-status', { hasText: 'openphone dashboard' }).waitFor();
  } finally {
    await tab.close();
    await page.evaluate((t) => localStorage.setItem('openphone.dashboard.token', t), token);
  }
});

test('logout ends the session: its socket closes, the token is forgotten and the cookie no longer works', async () => {
  await page.setViewportSize(SIZES.desktop);
  await page.goto(`${base}/ui/#/confirmations`);
  await page.locator('#pill-daemon .value', { hasText: 'connected' }).waitFor();
  const cookie = (await context.cookies(`${base}/ui/`)).find((c) => c.name === 'openphone_dashboard');
  const token = await page.evaluate(() => localStorage.getItem('openphone.dashboard.token'));
  await page.click('#logout');
  await page.waitForURL(`${base}/ui/login`);
  assert.equal(await page.evaluate(() => localStorage.getItem('openphone.dashboard.token')), null);
  assert.equal((await http('/ui/api/session', { headers: { cookie: `openphone_dashboard=${cookie.value}`, 'x-openphone-csrf': token } })).status, 401);
});
