// Everything that waits for the user — runtime confirmations, background job reviews, goal
// approvals — as one list (`inbox.list`; on a daemon without it, `confirmations.list` and the
// jobs awaiting review), each rendered as the person decides it and resolved by its own rules
// (`inbox.resolve`, else `confirmations.resolve` / `jobs.review`).
import { actionPhrase, commandWords, folded, hostText, paramList, readable, recipient, timeEl } from './fmt.js';

// Items whose technical details the person opened: a re-render (any inbox event) keeps them open.
const opened = new Set();

const KIND_LABEL = { confirmation: 'Confirmation', job_review: 'Job review', goal_approval: 'Goal approval' };

/** The uuid's first 8 hex of an id (`runtime-confirm-<uuid>`, `job-confirm-<uuid>`). */
function shortOf(id) {
  const m = String(id).match(/([0-9a-f]{8})-[0-9a-f]{4}-/i);
  return m ? m[1] : String(id).slice(-8);
}

function fromInbox(item) {
  const d = item.detail || {};
  return {
    ...item,
    runtime: d.runtime || null,
    params: d.params && typeof d.params === 'object' ? d.params : null,
    job_title: d.job_title || d.title || null,
    detail: d,
  };
}

function fromConfirmation(c) {
  // A goal's step asks under the request id `goal_<id>:<action>:<n>`.
  const goal = /^(goal_[^:]+):([^:]+):\d+$/.exec(c.request_id || '');
  return {
    id: c.confirmation_id,
    short_id: shortOf(c.confirmation_id),
    kind: goal ? 'goal_approval' : 'confirmation',
    state: c.expires_at_ms && c.expires_at_ms < Date.now() ? 'expired' : 'pending',
    title: c.summary,
    summary: c.summary,
    requested_by: c.runtime,
    runtime: c.runtime,
    tool: c.tool,
    risk: c.risk,
    created_at_ms: c.created_at_ms,
    expires_at_ms: c.expires_at_ms,
    goal_id: goal ? goal[1] : null,
    action_id: goal ? goal[2] : null,
    phone_session_id: c.phone_session_id || null,
    session_grant_offered: !!c.session_grant_offered,
    params: null,
    detail: { request_id: c.request_id },
  };
}

export function jobItem(entry) {
  const j = entry.job || entry;
  const r = j.pending_tool_request_json || {};
  return {
    id: j.pending_confirmation_id,
    short_id: shortOf(j.pending_confirmation_id),
    kind: 'job_review',
    state: r.expires_at && r.expires_at < Date.now() ? 'expired' : 'pending',
    title: `Job “${j.title}”: ${actionPhrase(r.tool, r.params)}`,
    summary: r.summary || commandWords(r.tool),
    requested_by: j.title,
    job_title: j.title,
    created_by: entry.created_by,
    runtime: r.runtime || null,
    tool: r.tool || null,
    risk: null,
    device_id: j.device_id || null,
    host: entry.host || null,
    created_at_ms: r.created_at || j.updated_at,
    expires_at_ms: r.expires_at || null,
    job_id: j.id,
    phone_session_id: r.phone_session_id || null,
    session_grant_offered: false,
    params: r.params && typeof r.params === 'object' ? r.params : null,
    detail: r,
  };
}

/** Loads what waits: `{items, counts, source}` (oldest first). */
export async function loadInbox(ctx) {
  if (ctx.methods.includes('inbox.list')) {
    const r = await ctx.rpc.call('inbox.list', {});
    const items = (r.items || []).map(fromInbox);
    await withGoalSteps(ctx, items);
    return { items, counts: r.counts || countsOf(items), source: 'inbox.list' };
  }
  const [c, j] = await Promise.all([
    ctx.rpc.call('confirmations.list', {}),
    ctx.rpc.call('jobs.list', { status: 'awaiting_review', limit: 200 }),
  ]);
  const items = [...c.confirmations.map(fromConfirmation),
    ...j.jobs.filter((e) => (e.job || e).pending_confirmation_id).map(jobItem)]
    .sort((a, b) => (a.created_at_ms || 0) - (b.created_at_ms || 0));
  await withGoalSteps(ctx, items);
  return { items, counts: countsOf(items), source: 'confirmations.list + jobs.list' };
}

/** A goal's approval: who asked is the goal, what will happen is its step (title, params). */
async function withGoalSteps(ctx, items) {
  await Promise.all(items.filter((i) => i.kind === 'goal_approval' && i.goal_id).map(async (i) => {
    try {
      const g = (await ctx.rpc.call('goals.get', { goal_id: i.goal_id })).goal;
      const step = g.actions.find((a) => a.id === i.action_id);
      i.requested_by = g.objective;
      if (step && step.params && !i.params) i.params = step.params;
      if (step) i.step_title = step.title;
    } catch { /* the goal is gone: the confirmation still shows */ }
  }));
}

function countsOf(items) {
  const counts = { confirmation: 0, job_review: 0, goal_approval: 0, total: items.length };
  for (const i of items) counts[i.kind] = (counts[i.kind] || 0) + 1;
  return counts;
}

/** Resolves an item by its own rules; resolves with a line for a person, or throws. */
export async function resolveItem(ctx, item, decision) {
  const verb = decision === 'deny' ? 'denied' : 'approved';
  const what = item.tool || KIND_LABEL[item.kind];
  if (ctx.methods.includes('inbox.resolve')) {
    const r = await ctx.rpc.call('inbox.resolve', { id: item.id, decision });
    const status = r.result && (r.result.status || r.result.result_status);
    return `${what}: ${r.outcome || verb}${status ? ` — result ${status}` : ''}${r.message ? ` (${r.message})` : ''}`;
  }
  if (item.kind === 'job_review') {
    const r = await ctx.rpc.call('jobs.review', { confirmation_id: item.id, decision });
    return `${what}: ${verb} — ${r.result_status ? `result ${r.result_status}` : r.code}${r.reason ? ` (${r.reason})` : ''}`;
  }
  const r = await ctx.rpc.call('confirmations.resolve', { confirmation_id: item.id, decision });
  return `${what}: ${verb} — result ${r.status}`;
}

/** Who asked, in words. */
function whoAsked(h, item) {
  if (item.kind === 'job_review') {
    return [h('strong', {}, item.job_title ? `job #${item.job_id ?? '?'} “${item.job_title}”` : item.requested_by),
      item.runtime ? ` on runtime ${item.runtime}` : null,
      item.created_by ? ` (created by ${item.created_by})` : null];
  }
  if (item.kind === 'goal_approval') {
    return [h('strong', {}, `goal “${item.requested_by || item.goal_id}”`),
      item.action_id ? ` (step “${item.step_title || item.action_id}”)` : null,
      item.runtime ? ` on runtime ${item.runtime}` : null];
  }
  return h('strong', {}, item.requested_by || item.runtime || '–');
}

/** One waiting item as a card: what it is, who asked, what will happen to whom, when it
 *  expires, Approve/Deny, and the technical record folded away. `onResolved(line)` after a
 *  decision. The card's `tick()` keeps the relative times current. */
export function itemCard(ctx, item, onResolved) {
  const { h } = ctx;
  const expires = timeEl(h, item.expires_at_ms, 'countdown');
  const to = recipient(item.params);
  const decide = (decision) => async (ev) => {
    const button = ev.currentTarget;
    const buttons = [...card.querySelectorAll('button')];
    buttons.forEach((b) => { b.disabled = true; });
    try {
      const line = await resolveItem(ctx, item, decision);
      if (onResolved) onResolved(line, item);
    } catch (e) {
      ctx.toast(e.message);
      buttons.forEach((b) => { b.disabled = false; });
      button.focus();
    }
  };
  // With the params at hand the headline is built from them (a stored summary may be a dump);
  // without, the stored summary is all there is.
  const headline = item.params ? actionPhrase(item.tool, item.params) : (item.summary || item.title);
  const kindClass = item.kind === 'confirmation' ? 'confirmation' : item.kind.replace('_', '-');
  const expired = item.state === 'expired';
  const card = h('article', {
    class: `card inbox-item ${kindClass}${expired ? ' expired' : ''}`, 'data-id': item.id, 'data-kind': item.kind,
    'data-confirmation-id': item.id, 'aria-label': `${KIND_LABEL[item.kind] || item.kind}: ${headline}`,
  },
  h('p', { class: 'row tags' },
    h('span', { class: `badge kind-${item.kind}` }, KIND_LABEL[item.kind] || item.kind),
    item.risk ? h('span', { class: `badge risk-${item.risk}` }, `risk ${item.risk}`) : null,
    expired ? h('span', { class: 'badge status-failed' }, 'expired') : null,
    h('code', { class: 'short-id', title: item.id }, item.short_id || shortOf(item.id))),
  h('h3', { class: 'summary' }, headline),
  item.params && readable(item.summary) && item.summary !== headline ? h('p', { class: 'said' }, item.summary) : null,
  h('dl', { class: 'facts' },
    h('dt', {}, 'Who asked'), h('dd', { class: 'who' }, whoAsked(h, item)),
    h('dt', {}, 'What will happen'), h('dd', { class: 'what' }, `${actionPhrase(item.tool, null)} `, item.tool ? h('code', {}, item.tool) : null),
    to ? [h('dt', {}, 'To'), h('dd', { class: 'to' }, to)] : null,
    item.host ? [h('dt', {}, 'Host'), h('dd', { class: 'host' }, hostText(item.host))] : null,
    item.device_id ? [h('dt', {}, 'Phone'), h('dd', {}, item.device_id)] : null,
    h('dt', {}, expired ? 'Expired' : 'Expires'), h('dd', { class: 'expires' }, expires)),
  item.params ? h('div', { class: 'request' }, h('h4', {}, 'The request'), paramList(h, item.params)) : null,
  expired ? h('p', { class: 'muted' }, 'This request expired: nothing will run. Approving it now is refused.') : h('div', { class: 'row actions' },
    h('button', { type: 'button', class: 'approve', onclick: decide('approve') }, 'Approve'),
    item.session_grant_offered ? h('button', { type: 'button', class: 'secondary', onclick: decide('accept_for_session') }, 'Approve for this session') : null,
    h('button', { type: 'button', class: 'danger deny', onclick: decide('deny') }, 'Deny')),
  folded(h, 'Technical details', {
    id: item.id,
    summary: item.summary,
    request_id: item.detail && item.detail.request_id,
    phone_session_id: item.phone_session_id,
    params_digest: item.detail && item.detail.params_digest,
    binding_digest: item.detail && item.detail.binding_digest,
    idempotency_key: item.detail && item.detail.idempotency_key,
  }, item.detail && Object.keys(item.detail).length > 1 ? item.detail : undefined));
  const tech = card.querySelector('details.tech');
  if (opened.has(item.id)) tech.open = true;
  tech.addEventListener('toggle', () => { if (tech.open) opened.add(item.id); else opened.delete(item.id); });
  card.tick = () => expires.refresh();
  return card;
}
