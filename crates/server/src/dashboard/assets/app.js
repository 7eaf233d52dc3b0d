// The dashboard shell: the connection, the status island, the page router.
import { Rpc, get, post, toLogin } from './rpc.js';
import { pages } from './pages.js';
import { loadInbox } from './inbox.js';

/** Builds an element: h('button', {class: 'x', onclick: fn}, 'text', child…). Text is never
 *  parsed as HTML, so daemon data cannot inject markup. */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (k === 'text') el.textContent = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

/** A short notice for the user (errors of an action). */
export function toast(text) {
  const t = document.getElementById('toast');
  t.textContent = text;
  t.hidden = false;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => { t.hidden = true; }, 6000);
}

const rpc = new Rpc();
const ctx = {
  rpc,
  h,
  toast,
  post,
  get,
  methods: [],
  /** What waits for the user (inbox.js): `{items, counts, source}`. */
  inbox: { items: [], counts: { total: 0 }, source: null },
  /** Reloads what waits (the island's count and the pending page); emits `inbox`. */
  async refreshInbox() {
    try {
      ctx.inbox = await loadInbox(ctx);
    } catch (e) { return; }
    // Which methods fed the list (for the browser suite and a curious operator).
    document.documentElement.dataset.inboxSource = ctx.inbox.source;
    renderIsland();
    ctx.emit('inbox');
  },
  async refreshRuntimes() {
    try { ctx.runtimes = await rpc.call('runtime.list', {}); } catch (e) { return; }
    renderIsland();
    ctx.emit('runtimes');
  },
  handlers: new Map(),
  /** Calls `fn` on an internal change (`inbox`, `runtimes`, `connected`, `tick`). */
  on(name, fn) {
    if (!ctx.handlers.has(name)) ctx.handlers.set(name, new Set());
    ctx.handlers.get(name).add(fn);
    return () => ctx.handlers.get(name).delete(fn);
  },
  emit(name, ...args) { (ctx.handlers.get(name) || []).forEach((fn) => fn(...args)); },
};

function setPill(id, cls, value) {
  const pill = document.getElementById(id);
  pill.classList.remove('ok', 'warn', 'bad');
  if (cls) pill.classList.add(cls);
  pill.querySelector('.value').textContent = value;
}

function renderIsland() {
  setPill('pill-daemon', rpc.connected ? 'ok' : 'bad', rpc.connected ? 'connected' : 'offline');
  const phone = rpc.hello && rpc.hello.phone;
  setPill('pill-phone', phone ? 'ok' : null, phone ? `${phone.model}` : '–');
  if (ctx.runtimes) {
    const online = ctx.runtimes.runtimes.filter((r) => r.status === 'connected').length;
    // An elevated runtime (`openphone elevate`) is worth seeing from every page.
    const elevated = ctx.runtimes.runtimes.filter((r) => r.elevation).length;
    const text = elevated > 0 ? `${online} connected · ${elevated} elevated` : `${online} connected`;
    setPill('pill-runtimes', online > 0 && elevated === 0 ? 'ok' : 'warn', text);
  }
  const c = ctx.inbox.counts || {};
  const n = ctx.inbox.items.length;
  const parts = [['confirmation', 'confirmation'], ['job_review', 'job review'], ['goal_approval', 'goal approval']]
    .filter(([k]) => c[k] > 0).map(([k, word]) => `${c[k]} ${word}${c[k] === 1 ? '' : 's'}`);
  setPill('pill-confirmations', n > 0 ? 'warn' : 'ok', n === 0 ? 'nothing' : `${n} waiting`);
  document.getElementById('pill-confirmations').title = parts.join(', ') || 'Nothing waits for you';
}

let cleanup = null;
function route() {
  const name = (location.hash.replace(/^#\//, '') || 'confirmations').split('/')[0];
  const page = pages[name] || pages.confirmations;
  document.querySelectorAll('.nav a').forEach((a) => {
    if (a.getAttribute('href') === `#/${name}`) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  });
  if (cleanup) { try { cleanup(); } catch (e) { console.error(e); } }
  const main = document.getElementById('main');
  main.replaceChildren();
  cleanup = page(ctx, main) || null;
  document.title = `OpenPhone — ${name}`;
}

rpc.onState(async (connected) => {
  renderIsland();
  if (connected) {
    try {
      ctx.methods = (await get('/ui/api/methods')).methods;
    } catch (e) { /* keep the previous list */ }
    await Promise.all([ctx.refreshInbox(), ctx.refreshRuntimes()]);
    route();
  }
  ctx.emit('connected', connected);
});

rpc.onEvent((event) => {
  if (event.startsWith('runtime.confirmation.') || event.startsWith('inbox.') || event.startsWith('goal.approval.')
    || event === 'background_job.review_required' || event === 'background_job.review_resolved') ctx.refreshInbox();
  if (event.startsWith('runtime.presence.') || event === 'runtime.elevation.changed') ctx.refreshRuntimes();
});

window.addEventListener('hashchange', () => {
  route();
  document.getElementById('main').focus();
});

document.getElementById('logout').addEventListener('click', async () => {
  try { await post('/ui/logout'); } catch (e) { toast(`Logout failed: ${e.message}`); return; }
  toLogin();
});

// The island's confirmation countdowns and the pages' timers share one tick.
setInterval(() => ctx.emit('tick'), 1000);
rpc.connect();
