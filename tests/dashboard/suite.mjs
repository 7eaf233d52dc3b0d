// The dashboard in a real browser: a real `openphone serve` on a temp data dir, a scripted
// runtime (a WebSocket client speaking the endpoint protocol with its configured token) and
// the system Chromium driven by playwright-core. Run by run.sh (which builds the binary).
//
// A scripted fake model (`openphone-fake-model`) is the built-in runtime's model, so a
// background job parks a message for review. Before the pages are measured every one of them
// has data: a job in review, a blocked goal, confirmations, audit records, sessions.
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
const FAKE_MODEL_BIN = process.env.FAKE_MODEL_BIN || path.join(path.dirname(BIN), 'openphone-fake-model');
// What the background job's model does: send a message (a state-changing call, parked for
// review), then report.
const MODEL_SCRIPT = {
  replies: [
    { tool_call: { name: 'messages_send', arguments: { to: '+49 151 2345 6789', body: 'Running late, sorry', reason: 'tell Alice the user is running late' } } },
  ],
  fallback: { text: 'Alice now knows you are running late.' },
};
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const SHOTS = process.env.SHOTS || path.join(ROOT, '.cache/dashboard-shots');
const RUNTIME_TOKEN = 'hermes-dashboard-token-0123456789';
const PAGES = ['confirmations', 'runtimes', 'sessions', 'ask', 'phone', 'audit', 'jobs', 'goals'];
const SIZES = { desktop: { width: 1280, height: 800 }, phone: { width: 390, height: 844 } };

let dir; let daemon; let base; let browser; let context; let page; let runtime; let model;

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
  const script = path.join(dir, 'model-script.json');
  fs.writeFileSync(script, JSON.stringify(MODEL_SCRIPT));
  model = spawn(FAKE_MODEL_BIN, ['--script', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  const modelUrl = await new Promise((resolve, reject) => {
    let out = '';
    model.stdout.on('data', (d) => { out += d; if (out.includes('\n')) resolve(out.split('\n')[0].trim()); });
    model.on('exit', (code) => reject(new Error(`openphone-fake-model exited ${code}`)));
  });
  fs.writeFileSync(config, `[builtin]\nbase_url = "${modelUrl}"\nmodel = "fake-model"\nrequest_timeout_secs = 10\n\n`
    + `[[runtimes]]\nid = "hermes"\ntoken = "${RUNTIME_TOKEN}"\ngrants = ["safe_read", "private_read", "dangerous"]\n`);
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
  // For working on the page's scripts without rebuilding the binary: DASHBOARD_ASSETS_DIR
  // serves /ui/assets/* from that directory instead of the embedded copies (never in CI).
  if (process.env.DASHBOARD_ASSETS_DIR) {
    await context.route('**/ui/assets/*', (route) => {
      const name = path.basename(new URL(route.request().url()).pathname);
      const file = path.join(process.env.DASHBOARD_ASSETS_DIR, name);
      if (!fs.existsSync(file)) return route.continue();
      return route.fulfill({ body: fs.readFileSync(file), contentType: name.endsWith('.css') ? 'text/css' : 'text/javascript' });
    });
  }
  page = await context.newPage();
  page.on('pageerror', (e) => console.error('page error:', e));
  page.on('console', (m) => { if (m.type() === 'error') console.error('console:', m.text()); });
  fs.mkdirSync(SHOTS, { recursive: true });
});

after(async () => {
  if (runtime) runtime.close();
  if (browser) await browser.close();
  if (daemon) { daemon.kill('SIGTERM'); await new Promise((r) => daemon.once('exit', r)); }
  if (model) model.kill('SIGTERM');
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
  await page.locator('#pill-confirmations .value', { hasText: '1 waiting' }).waitFor();
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

/** `openphone ARGS --data-dir DIR --json`, parsed. */
function cliJson(args) {
  return JSON.parse(execFileSync(BIN, [...args, '--data-dir', dir, '--json'], { encoding: 'utf8' }));
}

/** The visible text of a locator (closed <details> contribute nothing). */
const visibleText = (locator) => locator.evaluate((el) => el.innerText);

let jobId; let goalId; let askSession;

test('a background job in review reads as the person decides it: who, what, to whom, until when; digests folded', async () => {
  const made = cliJson(['jobs', 'create', '--title', 'Tell Alice', '--prompt', "Tell Alice I'm running late"]);
  jobId = made.job.id;
  cliJson(['jobs', 'wake']);
  await waitFor('the job to park for review', () => cliJson(['jobs', 'show', String(jobId)]).job.status === 'awaiting_review', 30000);

  await page.goto(`${base}/ui/#/confirmations`);
  const card = page.locator('article.inbox-item[data-kind="job_review"]');
  await card.waitFor();
  await page.locator('#pill-confirmations .value', { hasText: 'waiting' }).waitFor();
  // The list comes from inbox.list when the daemon has it (else the older methods).
  const methods = await page.evaluate(() => fetch('/ui/api/methods', { headers: { 'X-OpenPhone-CSRF': localStorage.getItem('openphone.dashboard.token') } }).then((r) => r.json()));
  const source = await page.evaluate(() => document.documentElement.dataset.inboxSource);
  assert.equal(source, methods.methods.includes('inbox.list') ? 'inbox.list' : 'confirmations.list + jobs.list');
  console.log(`pending list from ${source}`);
  const text = await visibleText(card);
  assert.match(text, /Job review/);
  assert.equal((await card.locator('h3').textContent()).trim(), 'Send a message to +49 151 2345 6789');
  assert.match(text, /Who asked/);
  assert.match(text, /Tell Alice/, text);
  assert.match(text, /builtin/, 'the runtime that asked');
  assert.match(text, /What will happen\s+Send a message messages_send/, 'the tool in words');
  assert.match(text, /To\s+\+49 151 2345 6789/, text);
  assert.match(text, /Running late, sorry/, 'the message body, as a param');
  assert.match(text, /Why\s+tell Alice the user is running late/, text);
  assert.match(text, /Expires\s+.+\(in /, `the expiry, local time and relative: ${text}`);
  // No JSON, no digests in sight: they are folded into "Technical details".
  assert.doesNotMatch(text, /params_digest|binding_digest|\{"|\\"/, text);
  assert.doesNotMatch(text, /\b1[0-9]{12}\b/, `no epoch ms: ${text}`);
  const tech = card.locator('details.tech');
  assert.equal(await tech.getAttribute('open'), null);
  assert.equal(await card.locator('pre.raw').isVisible(), false);
  await tech.locator('summary').click();
  await card.locator('pre.raw').waitFor();
  assert.match(await visibleText(card.locator('details.tech')), /params_digest/);
  await tech.locator('summary').click();
  assert.ok(await card.getByRole('button', { name: 'Approve', exact: true }).isVisible());
  assert.ok(await card.getByRole('button', { name: 'Deny' }).isVisible());

  // The job's own page shows the same review, not the stored record's JSON.
  await page.goto(`${base}/ui/#/jobs/${jobId}`);
  const review = page.locator('#job-detail section.review article.inbox-item');
  await review.waitFor();
  const shown = await visibleText(page.locator('#job-detail'));
  assert.match(shown, /\+49 151 2345 6789/);
  assert.doesNotMatch(shown, /params_digest|\{"/, shown);
});

test('a blocked goal shows its actions and states, what blocks it and the buttons that resolve it', async () => {
  const spec = path.join(dir, 'goal.json');
  fs.writeFileSync(spec, JSON.stringify({
    objective: 'tell Alice I am running late and ask when to meet',
    deadline_in: '6h',
    max_parallel: 2,
    plan: [
      { id: 'when', title: 'Ask when to meet', kind: 'ask_user', question: 'Which day suits you for the meeting?' },
      { id: 'tell', title: 'Tell Alice', kind: 'tool', command: 'openphone.messages.send',
        params: { to: '+49 170 555 0101', body: 'Running late, see you soon' } },
    ],
  }));
  goalId = cliJson(['goals', 'create', spec]).goal.id;
  await waitFor('the goal to block', () => {
    const g = cliJson(['goals', 'show', goalId]).goal;
    return g.blockers && g.blockers.some((b) => b.kind === 'approval') && g.blockers.some((b) => b.kind === 'input');
  }, 30000);

  await page.goto(`${base}/ui/#/goals`);
  const card = page.locator(`article.goal[data-goal-id="${goalId}"]`);
  await card.locator('.blockers').waitFor();
  const text = await visibleText(card);
  assert.match(text, /tell Alice I am running late/);
  // messages.send is above the goal's medium risk: the planner added the safer draft, which
  // waits for approval, beside the question.
  assert.match(text, /0 of 3 steps done/, text);
  assert.match(text, /Deadline\s+.+\(in [56] hours\)/, text);
  assert.match(text, /Blocked on/);
  assert.match(text, /Which day suits you for the meeting\?/);
  assert.match(text, /NEEDS_APPROVAL/, 'the action states');
  assert.match(text, /Send a message to \+49 170 555 0101/);
  assert.match(text, /Draft a message to \+49 170 555 0101/);
  assert.match(text, /Checkpoints/);
  assert.match(text, /Last report/);
  assert.match(text, /openphone (confirmations|goals|inbox) approve/, 'the command that resolves it');
  assert.match(text, /openphone goals answer/);
  const approval = card.locator('.blocker.kind-approval');
  assert.ok(await approval.getByRole('button', { name: 'Approve', exact: true }).isVisible());
  assert.ok(await card.locator('.blocker.kind-input').getByRole('button', { name: 'Answer' }).isVisible());
  assert.ok(await card.locator('.blocker.kind-policy').getByRole('button', { name: 'Drop this step' }).isVisible());
  // The goal approval is in the one pending list too.
  await page.goto(`${base}/ui/#/confirmations`);
  const pending = page.locator('#confirmation-list article.inbox-item[data-kind="goal_approval"]');
  await pending.waitFor();
  const said = await visibleText(pending);
  assert.match(said, /Draft a message to \+49 170 555 0101/, said);
  assert.match(said, /goal “tell Alice I am running late/, said);
});

test("Ask shows the runtime's waiting confirmation inline, Approve works there, and the reply survives a page switch", async () => {
  await page.goto(`${base}/ui/#/ask`);
  await page.getByLabel('What to ask').fill('Open my messages please');
  await page.getByLabel('Runtime').selectOption('hermes');
  const seen = runtime.events.length;
  await page.getByRole('button', { name: 'Ask' }).click();
  const asked = await waitFor('the attention request', () => runtime.events.slice(seen).find((e) => e.event === 'runtime.attention.requested'));
  const session = asked.payload.phone_session_id;
  askSession = session;
  await runtime.call('runtime.message', { phone_session_id: session, text: 'Opening Messages, ', final: false });
  await page.locator('#ask-transcript', { hasText: 'Opening Messages' }).waitFor();
  const parked = await runtime.call('tools.invoke', { request_id: 'ask-tap', tool: 'openphone.ui.tap', phone_session_id: session,
    params: { x: 40, y: 40, reason: 'open Messages for the user' }, wait: false });
  assert.equal(parked.result.status, 'needs_confirmation', JSON.stringify(parked));
  const inline = page.locator('#ask-waiting article.inbox-item');
  await inline.waitFor();
  assert.match(await visibleText(inline), /openphone\.ui\.tap/);

  // Away and back: the question, the reply so far and the waiting confirmation are still there.
  await page.goto(`${base}/ui/#/audit`);
  await page.locator('main h2', { hasText: 'Audit' }).waitFor();
  await page.goto(`${base}/ui/#/ask`);
  await page.locator('#ask-transcript', { hasText: 'Opening Messages' }).waitFor();
  assert.match(await page.locator('#ask-asked').textContent(), /Open my messages please/);
  await inline.waitFor();
  // A reload too (sessionStorage).
  await page.reload();
  await page.locator('#ask-transcript', { hasText: 'Opening Messages' }).waitFor();
  await inline.waitFor();

  await inline.getByRole('button', { name: 'Approve', exact: true }).click();
  await page.locator('#ask-outcome', { hasText: 'approved' }).waitFor();
  await waitFor("the runtime's result", () => runtime.toolResults('ask-tap').length === 1);
  assert.equal(runtime.toolResults('ask-tap')[0].payload.status, 'ok');
  await waitFor('the inline card to go', async () => (await page.locator('#ask-waiting article').count()) === 0);
  await runtime.call('runtime.message', { phone_session_id: session, text: 'Opening Messages, done.', final: true });
  await page.locator('#ask-transcript', { hasText: 'done.' }).waitFor();
});

test('every page at desktop and phone sizes has visible content', async () => {
  // Something for every list to show: the job in review, the blocked goal, a pending
  // confirmation, the audit, sessions (from the Ask tests).
  assert.ok(jobId && goalId, 'the job and goal tests ran first');
  // The tap waits in the Ask's session, so the Ask page shows it inline too.
  await runtime.call('tools.invoke', { request_id: 'tap-shot', tool: 'openphone.ui.tap', phone_session_id: askSession, params: { x: 20, y: 20, reason: 'for the screenshot' }, wait: false, timeout_ms: 600000 });
  const filled = {
    ask: () => page.locator('#ask-waiting article.inbox-item').waitFor(),
    confirmations: () => page.locator('article.inbox-item[data-kind="job_review"]').waitFor(),
    sessions: () => page.locator('#session-list tbody tr').first().waitFor(),
    audit: () => page.locator('#audit-table tbody tr').first().waitFor(),
    jobs: () => page.locator('#job-list tbody tr').first().waitFor(),
    goals: () => page.locator('article.goal .blockers').first().waitFor(),
    runtimes: () => page.locator('[data-runtime="hermes"]').waitFor(),
  };
  const written = [];
  for (const [size, viewport] of Object.entries(SIZES)) {
    await page.setViewportSize(viewport);
    for (const name of PAGES) {
      await page.goto(`${base}/ui/#/${name}`);
      await page.locator('#pill-daemon .value', { hasText: 'connected' }).waitFor();
      await page.locator('main h2').waitFor();
      if (filled[name]) await filled[name]();
      await sleep(300);
      const text = (await page.locator('main').innerText()).trim();
      assert.ok(text.length > 20, `${name} at ${size} shows little: ${text}`);
      const box = await page.locator('main').boundingBox();
      assert.ok(box && box.width > 200 && box.height > 50, `${name} at ${size}: main is ${JSON.stringify(box)}`);
      // Nothing scrolls sideways (usable on a phone), pills show their whole text, and a
      // table at phone width is cards, not columns wrapping word by word.
      const layout = await page.evaluate(() => ({
        scroll: document.scrollingElement.scrollWidth,
        inner: window.innerWidth,
        clipped: [...document.querySelectorAll('.pill, .badge')].filter((el) => el.scrollWidth > el.clientWidth + 1).map((el) => el.textContent),
        narrowCells: [...document.querySelectorAll('main td .cell')].filter((el) => el.textContent.trim().length > 12 && el.getBoundingClientRect().width < 120).map((el) => el.textContent),
      }));
      assert.ok(layout.scroll <= layout.inner, `${name} at ${size} scrolls sideways: ${layout.scroll} > ${layout.inner}`);
      assert.deepEqual(layout.clipped, [], `${name} at ${size}: clipped pills or badges`);
      if (size === 'phone') assert.deepEqual(layout.narrowCells, [], `${name} at ${size}: cells squeezed into narrow columns`);
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

test("the goal's buttons resolve its blockers, and the job review's Approve runs the message once", async () => {
  await page.setViewportSize(SIZES.desktop);
  await page.goto(`${base}/ui/#/goals`);
  const card = page.locator(`article.goal[data-goal-id="${goalId}"]`);
  await card.locator('.blocker.kind-input').waitFor();
  await card.locator('.blocker.kind-input input').fill('Thursday');
  await card.locator('.blocker.kind-input').getByRole('button', { name: 'Answer' }).click();
  await waitFor('the answer to land', async () => (await card.locator('.blocker.kind-input').count()) === 0);
  await card.locator('.step[data-action="when"] .badge', { hasText: 'DONE' }).waitFor();
  await card.locator('.blocker.kind-approval').getByRole('button', { name: 'Approve', exact: true }).click();
  await waitFor('the approval to land', async () => (await card.locator('.blocker.kind-approval').count()) === 0);
  await card.locator('.step[data-action="tell-safer"] .badge', { hasText: 'DONE' }).waitFor();
  await card.locator('.progress-text', { hasText: '2 of 3 steps done' }).waitFor();

  await page.goto(`${base}/ui/#/confirmations`);
  const review = page.locator('article.inbox-item[data-kind="job_review"]');
  await review.getByRole('button', { name: 'Approve', exact: true }).click();
  await page.locator('#confirmation-outcome', { hasText: 'result ok' }).waitFor();
  await waitFor('the review to leave the list', async () => (await review.count()) === 0);
  const shown = cliJson(['jobs', 'show', String(jobId)]);
  assert.notEqual(shown.job.status, 'awaiting_review', JSON.stringify(shown.job.status));
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
