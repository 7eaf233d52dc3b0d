// The dashboard's pages. Each takes (ctx, main), renders into main, and returns a cleanup.
// Everything goes through ctx.rpc (the operator endpoint's methods) except the audit chain
// check (POST /ui/api/audit/verify). Daemon data is always set as text, never as HTML.
import { itemCard, jobItem } from './inbox.js';
import { dataTable, hostText, ident, localTime, when } from './fmt.js';
import { goals } from './goals.js';

const transcripts = new Map(); // phone_session_id -> { text, final, error }
let transcriptListeners = new Set();
let wired = false;

/** Keeps every session's streamed reply since the page was loaded. */
function wireTranscripts(ctx) {
  if (wired) return;
  wired = true;
  ctx.rpc.onEvent((event, p) => {
    if (event === 'runtime.message.delta' || event === 'runtime.message.final') {
      const t = transcripts.get(p.phone_session_id) || { text: '', final: false };
      if (event === 'runtime.message.delta') t.text += p.text || '';
      else { t.text = p.text || t.text; t.final = true; t.error = p.error || null; }
      transcripts.set(p.phone_session_id, t);
      if (p.phone_session_id === askState.session) { askState.reply = t.text; saveAsk(); }
      transcriptListeners.forEach((fn) => fn(p.phone_session_id));
    }
  });
}

function onTranscript(fn) {
  transcriptListeners.add(fn);
  return () => transcriptListeners.delete(fn);
}

function badge(h, kind, value) {
  return h('span', { class: `badge ${kind}-${value}` }, value ?? '–');
}

function reqId(prefix) {
  return `${prefix}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
}

/** Runs an action, disabling its button meanwhile; errors become a toast. */
async function act(ctx, button, fn) {
  button.disabled = true;
  try { return await fn(); } catch (e) { ctx.toast(e.message); return undefined; } finally { button.disabled = false; }
}

// ---- Pending: everything that waits for the user ---------------------------------------

function confirmations(ctx, main) {
  const { h } = ctx;
  const list = h('div', { id: 'confirmation-list' });
  const counts = h('p', { id: 'inbox-counts', class: 'muted' });
  const outcome = h('p', { id: 'confirmation-outcome', role: 'status', 'aria-live': 'polite', class: 'muted' });
  main.append(h('h2', {}, 'Waiting for you'),
    h('p', { class: 'muted' }, 'Runtime confirmations, background job reviews and goal approvals: the desktop version of the phone\'s confirmation sheet. The same list as ',
      h('code', {}, 'openphone inbox'), '.'),
    counts, outcome, list);
  let cards = [];
  const render = () => {
    const { items, counts: c = {} } = ctx.inbox;
    const n = (k, word) => `${c[k] || 0} ${word}${c[k] === 1 ? '' : 's'}`;
    counts.textContent = `${items.length} waiting: ${n('confirmation', 'confirmation')}, ${n('job_review', 'job review')}, ${n('goal_approval', 'goal approval')}.`;
    if (items.length === 0) {
      cards = [];
      list.replaceChildren(h('p', { class: 'muted', id: 'no-confirmations' }, 'Nothing is waiting for you.'));
      return;
    }
    cards = items.map((item) => itemCard(ctx, item, (line) => {
      outcome.textContent = line;
      ctx.refreshInbox();
    }));
    list.replaceChildren(...cards);
  };
  render();
  ctx.refreshInbox();
  const offs = [ctx.on('inbox', render), ctx.on('tick', () => cards.forEach((card) => card.tick()))];
  return () => offs.forEach((off) => off());
}

// ---- Runtimes and routing -----------------------------------------------------------------

/** The badge of an active elevation (`openphone elevate`): its level and when it ends. */
function elevated(h, e) {
  const until = new Date(e.expires_at_ms).toLocaleTimeString();
  return h('span', { class: 'badge warn elevated', title: `grant ${e.grant_id} by ${e.granted_by}` },
    `elevated → ${e.to} until ${until}`);
}

function runtimes(ctx, main) {
  const { h } = ctx;
  const table = h('div', { class: 'table-wrap' });
  const routing = h('div', { class: 'row', id: 'routing' });
  const approvals = h('div', { id: 'approvals' });
  main.append(h('h2', {}, 'Runtimes'), table, h('h3', {}, 'Routing'),
    h('p', { class: 'muted' }, 'Which runtime answers each surface.'), routing,
    h('h3', {}, 'Standing approvals and session grants'), approvals);
  const render = () => {
    const rl = ctx.runtimes;
    if (!rl) return;
    table.replaceChildren(dataTable(h, ['Runtime', 'Kind', 'Enabled', 'Status', 'Connections', 'Surfaces'],
      rl.runtimes.map((r) => ({ attrs: { 'data-runtime': r.id }, cells: [
        h('strong', {}, r.id), r.kind, r.enabled ? 'yes' : 'no',
        [badge(h, 'status', r.status), r.elevation ? elevated(h, r.elevation) : null],
        r.connections, r.surfaces.join(', ') || '–'] }))));
    routing.replaceChildren(...['chat', 'volume', 'background'].map((surface) => {
      const current = rl.runtimes.find((r) => r.surfaces.includes(surface));
      const select = h('select', { id: `route-${surface}`, onchange: async (ev) => {
        const runtime = ev.target.value;
        try {
          await ctx.rpc.call('runtime.select', { surface, runtime });
          ctx.toast(`${surface} → ${runtime}`);
        } catch (e) { ctx.toast(e.message); }
        ctx.refreshRuntimes();
      } }, current ? null : h('option', { value: '', selected: true }, '(none)'),
      rl.runtimes.map((r) => h('option', { value: r.id, selected: current && current.id === r.id }, r.id)));
      return h('label', { for: `route-${surface}` }, `Surface ${surface}`, select);
    }));
  };
  const loadApprovals = async () => {
    try {
      const r = await ctx.rpc.call('approvals.list', {});
      const items = r.approvals || [];
      if (items.length === 0) { approvals.replaceChildren(h('p', { class: 'muted' }, 'None.')); return; }
      approvals.replaceChildren(h('div', { class: 'table-wrap' }, dataTable(h, ['Id', 'Runtime', 'Command', 'State', ''],
        items.map((a) => ({ cells: [
          String(a.approval_id), a.runtime, a.tool, a.state || '–',
          a.state === 'active' ? h('button', { type: 'button', class: 'secondary', onclick: async (ev) => {
            await act(ctx, ev.currentTarget, () => ctx.rpc.call('approvals.revoke', { approval_id: String(a.approval_id) }));
            loadApprovals();
          } }, 'Revoke') : ''] })))));
    } catch (e) { approvals.replaceChildren(h('p', { class: 'muted' }, e.message)); }
  };
  const grantRuntime = h('select', { id: 'grant-runtime' }, (ctx.runtimes ? ctx.runtimes.runtimes : []).map((r) => h('option', { value: r.id }, r.id)));
  const grantTool = h('input', { id: 'grant-tool', type: 'text', required: true, placeholder: 'openphone.app.open or group:…' });
  const grantHours = h('input', { id: 'grant-hours', type: 'number', min: '1', max: '720', value: '2' });
  const grant = h('form', { class: 'row', onsubmit: async (ev) => {
    ev.preventDefault();
    const r = await act(ctx, grant.querySelector('button'), () => ctx.rpc.call('approvals.grant', {
      runtime: grantRuntime.value, tool: grantTool.value, expires_in_ms: Number(grantHours.value) * 3600000,
    }));
    if (r) { ctx.toast(`approval ${r.approval_id} granted`); grantTool.value = ''; loadApprovals(); }
  } }, h('label', { for: 'grant-runtime' }, 'Runtime', grantRuntime), h('label', { for: 'grant-tool' }, 'Command', grantTool),
  h('label', { for: 'grant-hours' }, 'Hours', grantHours), h('button', { type: 'submit' }, 'Grant approval'));
  main.append(h('h3', {}, 'New standing approval'), h('p', { class: 'muted' }, 'Lets the runtime use the command without asking (never below the risk floor).'), grant);
  render();
  loadApprovals();
  ctx.refreshRuntimes();
  const off = ctx.on('runtimes', render);
  return off;
}

// ---- Sessions and transcripts ------------------------------------------------------------

function sessions(ctx, main) {
  const { h } = ctx;
  wireTranscripts(ctx);
  const list = h('div', { class: 'table-wrap', id: 'session-list' });
  const detail = h('section', { id: 'session-detail', 'aria-live': 'polite' });
  main.append(h('h2', {}, 'Sessions'), h('div', { class: 'grid2' }, list, detail));
  let selected = (location.hash.split('/')[2]) || null;
  const load = async () => {
    let r;
    try { r = await ctx.rpc.call('sessions.list', { limit: 50 }); } catch (e) { list.replaceChildren(h('p', {}, e.message)); return; }
    if (r.sessions.length === 0) { list.replaceChildren(h('p', { class: 'muted' }, 'No phone sessions yet. Use Ask to start one.')); return; }
    list.replaceChildren(dataTable(h, ['Session', 'Runtime', 'Status', 'Updated'],
      r.sessions.map((s) => ({ cells: [
        h('a', { href: `#/sessions/${encodeURIComponent(s.phone_session_id)}` }, s.summary || s.phone_session_id),
        s.runtime_kind, badge(h, 'status', s.status), localTime(s.updated_at_ms)] }))));
  };
  const show = async () => {
    if (!selected) { detail.replaceChildren(h('p', { class: 'muted' }, 'Pick a session to see its transcript.')); return; }
    let s;
    try { s = (await ctx.rpc.call('sessions.get', { phone_session_id: selected })).session; } catch (e) { detail.replaceChildren(h('p', {}, e.message)); return; }
    const t = transcripts.get(selected);
    const active = !['completed', 'failed'].includes(s.status);
    detail.replaceChildren(h('div', { class: 'card' },
      h('h3', {}, s.summary || s.phone_session_id),
      h('p', { class: 'row' }, badge(h, 'status', s.status), h('span', {}, `runtime ${s.runtime_kind}`), h('span', {}, `source ${s.source}`)),
      s.failure_reason ? h('p', {}, `Failed: ${s.failure_reason}`) : null,
      h('h4', {}, 'You'), h('div', { class: 'transcript' }, s.summary),
      h('h4', {}, 'Runtime'), h('div', { class: 'transcript', id: 'transcript' }, t ? t.text : '(the reply streams here while this page is open)'),
      active ? h('button', { type: 'button', class: 'danger', onclick: async (ev) => {
        await act(ctx, ev.currentTarget, () => ctx.rpc.call('sessions.cancel', { phone_session_id: selected }));
        show();
      } }, 'Cancel session') : null));
  };
  const onHash = () => { selected = location.hash.split('/')[2] ? decodeURIComponent(location.hash.split('/')[2]) : null; show(); };
  load(); onHash();
  const offRpc = ctx.rpc.onEvent((event) => { if (event === 'runtime.session.updated') { load(); show(); } });
  const offT = onTranscript((id) => { if (id === selected) { const el = document.getElementById('transcript'); if (el) el.textContent = transcripts.get(id).text; } });
  window.addEventListener('hashchange', onHash);
  return () => { offRpc(); offT(); window.removeEventListener('hashchange', onHash); };
}

// ---- Ask --------------------------------------------------------------------------------

// The Ask page's state outlives the page (switching pages) and a reload (sessionStorage):
// the draft, the choices, the running ask and its reply so far.
const ASK_KEY = 'openphone.dashboard.ask';
const askState = (() => {
  try { return JSON.parse(sessionStorage.getItem(ASK_KEY)) || {}; } catch { return {}; }
})();
function saveAsk() {
  try { sessionStorage.setItem(ASK_KEY, JSON.stringify(askState)); } catch { /* storage unavailable */ }
}

function ask(ctx, main) {
  const { h } = ctx;
  wireTranscripts(ctx);
  const text = h('textarea', { id: 'ask-text', required: true });
  text.value = askState.draft || '';
  text.addEventListener('input', () => { askState.draft = text.value; saveAsk(); });
  const surface = h('select', { id: 'ask-surface' }, ['chat', 'chat_voice', 'volume_voice', 'notification'].map((s) => h('option', { value: s, selected: askState.surface === s }, s)));
  const runtime = h('select', { id: 'ask-runtime' }, h('option', { value: '' }, '(routed)'),
    (ctx.runtimes ? ctx.runtimes.runtimes : []).map((r) => h('option', { value: r.id, selected: askState.runtime === r.id }, r.id)));
  surface.addEventListener('change', () => { askState.surface = surface.value; saveAsk(); });
  runtime.addEventListener('change', () => { askState.runtime = runtime.value; saveAsk(); });
  const out = h('div', { id: 'ask-result', 'aria-live': 'polite' });
  const waiting = h('section', { id: 'ask-waiting', 'aria-live': 'polite' });
  const outcome = h('p', { id: 'ask-outcome', role: 'status', class: 'muted' });
  let cards = [];
  const replyText = () => {
    const t = askState.session && transcripts.get(askState.session);
    return (t && t.text) || askState.reply || '…';
  };
  const renderResult = () => {
    if (!askState.session) { out.replaceChildren(); return; }
    out.replaceChildren(h('div', { class: 'card' },
      h('p', { class: 'muted' }, 'You asked: ', h('q', { id: 'ask-asked' }, askState.asked || '')),
      h('p', {}, `${askState.message || 'Asked'} — `, h('a', { href: `#/sessions/${encodeURIComponent(askState.session)}` }, 'open the session')),
      h('div', { class: 'transcript', id: 'ask-transcript' }, replyText())));
  };
  // What this ask waits on: the items of its phone session (a confirmation its runtime asked for).
  const renderWaiting = () => {
    const mine = askState.session ? ctx.inbox.items.filter((i) => i.phone_session_id === askState.session) : [];
    cards = mine.map((item) => itemCard(ctx, item, (line) => { outcome.textContent = line; ctx.refreshInbox(); }));
    waiting.replaceChildren(...(mine.length ? [h('h3', {}, 'Waiting for you'),
      h('p', { class: 'muted' }, 'The runtime is waiting for your decision before it goes on.'), ...cards] : []));
  };
  const form = h('form', { onsubmit: async (ev) => {
    ev.preventDefault();
    const button = form.querySelector('button');
    const params = { surface: surface.value, text: text.value };
    if (runtime.value) params.runtime = runtime.value;
    const r = await act(ctx, button, () => ctx.rpc.call('attention.request', params));
    if (!r) return;
    Object.assign(askState, { session: r.phone_session_id, message: r.message, asked: text.value, reply: '', draft: '' });
    text.value = '';
    outcome.textContent = '';
    saveAsk();
    renderResult();
    renderWaiting();
  } },
  h('label', { for: 'ask-text', class: 'block' }, 'What to ask', text),
  h('div', { class: 'row' }, h('label', { for: 'ask-surface' }, 'Surface', surface), h('label', { for: 'ask-runtime' }, 'Runtime', runtime)),
  h('p', {}, h('button', { type: 'submit' }, 'Ask')));
  main.append(h('h2', {}, 'Ask'), h('p', { class: 'muted' }, 'An attention request, as from the phone\'s chat.'), form, out, waiting, outcome);
  renderResult();
  renderWaiting();
  const offs = [
    onTranscript((id) => {
      if (id !== askState.session) return;
      askState.reply = transcripts.get(id).text;
      saveAsk();
      const el = document.getElementById('ask-transcript');
      if (el) el.textContent = askState.reply;
    }),
    ctx.on('inbox', renderWaiting),
    ctx.on('tick', () => cards.forEach((c) => c.tick())),
  ];
  return () => offs.forEach((off) => off());
}

// ---- The phone ---------------------------------------------------------------------------

function treeList(h, node) {
  if (!node || typeof node !== 'object') return null;
  const name = [node.class, node.text ? `“${node.text}”` : null, node.content_description ? `[${node.content_description}]` : null,
    node.clickable ? 'clickable' : null].filter(Boolean).join(' ');
  return h('li', {}, h('span', {}, name || node.element_id),
    node.children && node.children.length ? h('ul', {}, node.children.map((c) => treeList(h, c))) : null);
}

function phone(ctx, main) {
  const { h } = ctx;
  const img = h('img', { class: 'shot', id: 'phone-shot', alt: 'The phone\'s current screen', width: 360, height: 780 });
  const info = h('p', { id: 'phone-info', class: 'muted', role: 'status' }, 'Loading the screen…');
  const tree = h('div', { class: 'tree', id: 'phone-tree' });
  const refresh = h('button', { type: 'button', id: 'phone-refresh', onclick: () => load() }, 'Refresh');
  const from = h('input', { id: 'inject-from', type: 'text', required: true, placeholder: 'Bob Nguyen or +49…' });
  const body = h('input', { id: 'inject-text', type: 'text', required: true });
  const inject = h('form', { class: 'row', onsubmit: async (ev) => {
    ev.preventDefault();
    const r = await act(ctx, inject.querySelector('button'), () => ctx.rpc.call('sim.inject', { kind: 'message', address: from.value, text: body.value }));
    if (r) { ctx.toast('message delivered to the simulated phone'); body.value = ''; load(); }
  } }, h('label', { for: 'inject-from' }, 'From', from), h('label', { for: 'inject-text' }, 'Text', body), h('button', { type: 'submit', class: 'secondary' }, 'Send to the phone'));
  main.append(h('h2', {}, 'The phone'), h('div', { class: 'row' }, refresh, info),
    h('div', { class: 'phone' }, h('div', {}, img), h('section', { 'aria-label': 'UI tree' }, h('h3', {}, 'UI tree'), tree)),
    h('h3', {}, 'Simulated phone: a message arrives'), inject);
  let loading = false;
  const load = async () => {
    if (loading) return;
    loading = true;
    try {
      const r = await ctx.rpc.call('tools.invoke', {
        request_id: reqId('dashboard-screen'), tool: 'openphone.screen.get',
        params: { include_screenshot: true, include_ui_tree: true }, reason: 'dashboard: show the phone',
      });
      if (r.status !== 'ok') { info.textContent = `The screen could not be read: ${r.status} ${(r.error && r.error.message) || ''}`; return; }
      const s = r.result;
      if (s.screenshot) img.src = `data:${s.screenshot.mime_type};base64,${s.screenshot.data_base64}`;
      info.textContent = `${s.title || s.package || ''} — captured ${localTime(s.captured_at)}`;
      tree.replaceChildren(h('ul', {}, treeList(h, s.ui_tree)));
    } catch (e) {
      info.textContent = e.message;
    } finally { loading = false; }
  };
  load();
  // A tool that ran (ours excluded) may have changed the screen.
  let timer = null;
  const off = ctx.rpc.onEvent((event, p) => {
    if (event === 'runtime.tool.result' && !(p.request_id || '').startsWith('dashboard-screen')) {
      clearTimeout(timer);
      timer = setTimeout(load, 200);
    }
  });
  return () => { off(); clearTimeout(timer); };
}

// ---- Audit -------------------------------------------------------------------------------

function audit(ctx, main) {
  const { h } = ctx;
  const f = {
    runtime: h('input', { id: 'audit-runtime', type: 'text', size: 10 }),
    tool: h('input', { id: 'audit-tool', type: 'text', size: 16 }),
    kind: h('select', { id: 'audit-kind' }, ['', 'tool_request', 'confirmation_transition', 'background_event', 'operator_action'].map((k) => h('option', { value: k }, k || 'any'))),
    status: h('select', { id: 'audit-status' }, ['', 'ok', 'needs_confirmation', 'denied', 'error', 'timeout'].map((k) => h('option', { value: k }, k || 'any'))),
  };
  const table = h('div', { class: 'table-wrap', id: 'audit-table' });
  const pager = h('p', { class: 'row' });
  const verifyOut = h('p', { id: 'verify-result', role: 'status', 'aria-live': 'polite' });
  const PAGE = 50;
  const starts = [0];
  let next = null;
  const matches = (r) => (!f.runtime.value || r.runtime.includes(f.runtime.value))
    && (!f.tool.value || (r.tool || '').includes(f.tool.value))
    && (!f.kind.value || r.kind === f.kind.value)
    && (!f.status.value || r.status === f.status.value);
  const load = async () => {
    const rows = [];
    let after = starts[starts.length - 1];
    let end = false;
    // Filters are applied to the log in order, a server page at a time, until a page is full.
    for (let scanned = 0; rows.length < PAGE && scanned < 20; scanned++) {
      let r;
      try { r = await ctx.rpc.call('audit.query', { after, limit: 500 }); } catch (e) { table.replaceChildren(h('p', {}, e.message)); return; }
      for (const rec of r.records) {
        if (rows.length >= PAGE) break;
        after = rec.seq;
        if (matches(rec)) rows.push(rec);
      }
      if (r.records.length < 500 && rows.length < PAGE) { end = true; break; }
    }
    next = end ? null : after;
    table.replaceChildren(rows.length === 0 ? h('p', { class: 'muted' }, 'No records match.') : dataTable(h,
      ['Seq', 'Time', 'Kind', 'Runtime', 'Tool', 'Decision', 'Confirmation', 'Status', 'Error'],
      rows.map((r) => ({ attrs: { 'data-seq': r.seq }, cells: [
        r.seq, localTime(r.at_ms), ident(h, r.kind), r.runtime, ident(h, r.tool),
        r.decision || '–', ident(h, r.confirmation), r.status ? badge(h, 'status', r.status) : '–', r.error_code ? ident(h, r.error_code) : ''] })),
      { caption: `Records ${rows[0].seq}–${rows[rows.length - 1].seq}, oldest first`, class: 'audit' }));
    pager.replaceChildren(
      h('button', { type: 'button', class: 'secondary', disabled: starts.length <= 1, onclick: () => { starts.pop(); load(); } }, 'Previous page'),
      h('button', { type: 'button', class: 'secondary', id: 'audit-next', disabled: next === null, onclick: () => { starts.push(next); load(); } }, 'Next page'));
  };
  const apply = h('button', { type: 'submit' }, 'Apply filters');
  const form = h('form', { class: 'row', onsubmit: (ev) => { ev.preventDefault(); starts.length = 1; load(); } },
    h('label', { for: 'audit-runtime' }, 'Runtime', f.runtime), h('label', { for: 'audit-tool' }, 'Tool', f.tool),
    h('label', { for: 'audit-kind' }, 'Kind', f.kind), h('label', { for: 'audit-status' }, 'Status', f.status), apply);
  const verify = h('button', { type: 'button', id: 'audit-verify', class: 'secondary', onclick: async (ev) => {
    const r = await act(ctx, ev.currentTarget, () => ctx.post('/ui/api/audit/verify'));
    if (!r) return;
    verifyOut.className = r.intact ? 'verify-ok' : 'verify-bad';
    verifyOut.textContent = r.intact
      ? `Chain intact: ${r.checked} records checked, head seq ${r.last_seq}.`
      : `Chain BROKEN: ${r.problem}`;
  } }, 'Verify chain');
  main.append(h('h2', {}, 'Audit'), form, h('p', { class: 'row' }, verify, verifyOut), table, pager);
  load();
  return null;
}

// ---- Jobs -------------------------------------------------------------------------------

function jobs(ctx, main) {
  const { h } = ctx;
  const status = h('select', { id: 'jobs-status' }, ['', 'queued', 'running', 'awaiting_review', 'paused', 'completed', 'failed', 'stopped'].map((s) => h('option', { value: s }, s || 'any')));
  const list = h('div', { class: 'table-wrap', id: 'job-list' });
  const detail = h('section', { id: 'job-detail', 'aria-live': 'polite' });
  let selected = location.hash.split('/')[2] || null;
  const title = h('input', { id: 'job-title', type: 'text', required: true });
  const prompt = h('textarea', { id: 'job-prompt', required: true });
  const delay = h('input', { id: 'job-delay', type: 'number', min: '0', value: '0' });
  const create = h('form', { onsubmit: async (ev) => {
    ev.preventDefault();
    const params = { title: title.value, prompt: prompt.value };
    if (Number(delay.value) > 0) params.next_run_at = Date.now() + Number(delay.value) * 60000;
    const r = await act(ctx, create.querySelector('button'), () => ctx.rpc.call('jobs.create', params));
    if (r) { title.value = ''; prompt.value = ''; load(); }
  } }, h('h3', {}, 'New job'), h('div', { class: 'row' }, h('label', { for: 'job-title' }, 'Title', title), h('label', { for: 'job-delay' }, 'Start in (minutes)', delay)),
  h('label', { for: 'job-prompt', class: 'block' }, 'Prompt', prompt),
  h('p', {}, h('button', { type: 'submit' }, 'Create job')));
  main.append(h('h2', {}, 'Background jobs'),
    h('div', { class: 'row' }, h('label', { for: 'jobs-status' }, 'Status', status),
      h('button', { type: 'button', class: 'secondary', onclick: async (ev) => { await act(ctx, ev.currentTarget, () => ctx.rpc.call('jobs.wake', {})); load(); } }, 'Run due jobs now')),
    h('div', { class: 'grid2' }, list, detail), create);
  status.addEventListener('change', () => load());
  const load = async () => {
    const params = { limit: 100 };
    if (status.value) params.status = status.value;
    let r;
    try { r = await ctx.rpc.call('jobs.list', params); } catch (e) { list.replaceChildren(h('p', {}, e.message)); return; }
    if (r.jobs.length === 0) { list.replaceChildren(h('p', { class: 'muted' }, 'No jobs.')); return; }
    // In a fleet (rows naming their host) every daemon lists the whole fleet: a column naming
    // each job's host, its phone under it (one column, so the half-width table stays readable).
    const fleet = r.jobs.some((e) => e.host);
    list.replaceChildren(dataTable(h, fleet ? ['Job', 'Host / phone', 'Status', 'Progress', 'Next run'] : ['Job', 'Status', 'Progress', 'Next run'],
      r.jobs.map((e) => {
        const j = e.job || e;
        const where = fleet ? [[h('span', { class: 'host' }, hostText(e.host) || '–'), h('br'), h('span', { class: 'muted phone' }, j.device_id || 'any phone')]] : [];
        return { attrs: { 'data-job': j.id }, cells: [h('a', { href: `#/jobs/${j.id}` }, `#${j.id} ${j.title}`), ...where,
          badge(h, 'status', j.status), j.progress_text || '–', j.next_run_at && ['queued', 'paused'].includes(j.status) ? when(j.next_run_at) : '–'] };
      })));
  };
  const show = async () => {
    if (!selected) { detail.replaceChildren(h('p', { class: 'muted' }, 'Pick a job to see its record and runs.')); return; }
    let r;
    try { r = await ctx.rpc.call('jobs.get', { job_id: Number(selected) }); } catch (e) { detail.replaceChildren(h('p', {}, e.message)); return; }
    const j = r.job;
    const op = (method) => async (ev) => { await act(ctx, ev.currentTarget, () => ctx.rpc.call(method, { job_id: j.id })); show(); load(); };
    const live = !['completed', 'failed', 'stopped'].includes(j.status);
    detail.replaceChildren(h('div', { class: 'card' },
      h('h3', {}, `#${j.id} ${j.title}`),
      h('p', { class: 'row' }, badge(h, 'status', j.status), h('span', {}, j.progress_text), h('span', {}, `delivery ${r.delivery_state || '–'}`), h('span', {}, `by ${r.created_by || 'operator'}`),
        r.host ? h('span', { class: 'host' }, `host ${hostText(r.host)}`) : null,
        r.host && j.device_id ? h('span', {}, `phone ${j.device_id}`) : null),
      h('p', {}, j.prompt),
      j.status === 'awaiting_review' && j.pending_confirmation_id
        ? h('section', { class: 'review', 'aria-label': 'Waiting for your review' }, h('h4', {}, 'Waiting for your review'),
          itemCard(ctx, ctx.inbox.items.find((i) => i.id === j.pending_confirmation_id) || jobItem(r), (line) => {
            ctx.toast(line); ctx.refreshInbox(); show(); load();
          })) : null,
      h('div', { class: 'row' },
        j.status === 'queued' ? h('button', { type: 'button', class: 'secondary', onclick: op('jobs.pause') }, 'Pause') : null,
        j.status === 'paused' ? h('button', { type: 'button', class: 'secondary', onclick: op('jobs.resume') }, 'Resume') : null,
        live ? h('button', { type: 'button', class: 'danger', onclick: op('jobs.stop') }, 'Stop') : null),
      j.last_result ? h('p', {}, `Last result: ${j.last_result}`) : null,
      h('h4', {}, 'Runs'),
      r.runs && r.runs.length ? dataTable(h, ['#', 'Due', 'Started', 'Outcome'],
        r.runs.map((run) => ({ cells: [run.attempt, localTime(run.intended_at), localTime(run.started_at), `${run.outcome || 'running'}${run.catch_up ? ' (catch-up)' : ''}`] })))
        : h('p', { class: 'muted' }, 'No runs yet.')));
  };
  const onHash = () => { selected = location.hash.split('/')[2] || null; show(); };
  load(); show();
  const off = ctx.rpc.onEvent((event) => { if (event.startsWith('background_job.')) { load(); show(); } });
  window.addEventListener('hashchange', onHash);
  return () => { off(); window.removeEventListener('hashchange', onHash); };
}

export const pages = { confirmations, runtimes, sessions, ask, phone, audit, jobs, goals };
