// The Goals page: what the CLI's `goals show` says, per goal — its actions and their states,
// what blocks it with the button (or command) that resolves each blocker (approve, answer,
// retry), the deadline and its checkpoints, the last report and the progress. `goals.list`
// for the list, `goals.get` per goal for the document.
import { actionPhrase, hostText, localTime, paramList, timeEl, when } from './fmt.js';
import { resolveItem } from './inbox.js';

// Answers being typed, by `goal/action`: a reload of the list (any goal event) keeps them.
const drafts = new Map();

const BADGE_STATES = ['DONE', 'BLOCKED', 'ABORTED', 'NEEDS_APPROVAL', 'RUNNING', 'READY', 'PLANNED', 'VERIFYING'];

function badge(h, kind, value) {
  const v = String(value ?? '–');
  const cls = BADGE_STATES.includes(v) ? v.toLowerCase() : v;
  return h('span', { class: `badge ${kind}-${cls}` }, v);
}

/** What an action does, in words. */
function actionWhat(h, a) {
  switch (a.kind) {
    case 'tool': return [actionPhrase(a.command, a.params), ' ', h('code', {}, a.command)];
    case 'agent_turn': return `asks the runtime: “${a.prompt}”`;
    case 'job': return `schedules a background job: “${a.prompt}”${a.run_at ? `, ${when(a.run_at)}` : ''}`;
    case 'wait': return a.on ? `waits for ${a.on.event} until ${when(a.until_ms)}` : `waits until ${when(a.until_ms)}`;
    case 'ask_user': return `asks you: “${a.question}”`;
    case 'verify': return 'checks the success criteria';
    default: return a.kind || '–';
  }
}

/** The control that resolves a blocker: Approve/Deny, an answer box, Retry — and always the
 *  command that does the same from a shell. */
function resolver(ctx, goal, b, reload) {
  const { h } = ctx;
  const run = async (button, fn) => {
    button.disabled = true;
    try {
      const line = await fn();
      ctx.toast(line);
      ctx.refreshInbox();
      reload();
    } catch (e) { ctx.toast(e.message); button.disabled = false; }
  };
  const controls = [];
  if (b.kind === 'approval' && b.resume_token) {
    const item = ctx.inbox.items.find((i) => i.id === b.resume_token)
      || { id: b.resume_token, kind: 'goal_approval', tool: null, detail: {} };
    const decide = (decision) => (ev) => run(ev.currentTarget, () => resolveItem(ctx, item, decision));
    controls.push(h('button', { type: 'button', class: 'approve', onclick: decide('approve') }, 'Approve'),
      h('button', { type: 'button', class: 'danger deny', onclick: decide('deny') }, 'Deny'));
  } else if (b.kind === 'input' && b.action_id) {
    const key = `${goal.id}/${b.action_id}`;
    const input = h('input', { type: 'text', class: 'answer', 'aria-label': `Your answer for ${b.action_id}` });
    input.value = drafts.get(key) || '';
    input.addEventListener('input', () => drafts.set(key, input.value));
    const send = (ev) => run(ev.currentTarget, async () => {
      if (!input.value.trim()) throw new Error('Type an answer first.');
      await ctx.rpc.call('goals.answer', { goal_id: goal.id, action_id: b.action_id, text: input.value });
      drafts.delete(key);
      return `answered ${b.action_id}`;
    });
    controls.push(input, h('button', { type: 'button', class: 'answer-send', onclick: send }, 'Answer'));
  } else if (/goals abort/.test(b.how_to_resolve || '') && b.action_id) {
    controls.push(h('button', { type: 'button', class: 'danger abort', onclick: (ev) => run(ev.currentTarget, async () => {
      await ctx.rpc.call('goals.abort', { goal_id: goal.id, action_id: b.action_id });
      return `dropped ${b.action_id}; its alternatives run`;
    }) }, 'Drop this step'));
  } else if (/goals retry/.test(b.how_to_resolve || '') && b.action_id) {
    controls.push(h('button', { type: 'button', class: 'retry', onclick: (ev) => run(ev.currentTarget, async () => {
      await ctx.rpc.call('goals.retry', { goal_id: goal.id, action_id: b.action_id });
      return `retrying ${b.action_id}`;
    }) }, 'Retry'));
  }
  return h('div', { class: 'resolve' },
    controls.length ? h('div', { class: 'row' }, controls) : null,
    h('p', { class: 'muted how' }, 'From a shell: ', h('code', {}, b.how_to_resolve || '–')));
}

function goalCard(ctx, summary, got, reload) {
  const { h } = ctx;
  const g = got ? got.goal : null;
  const times = [];
  const t = (ms) => { const el = timeEl(h, ms); times.push(el); return el; };
  // From the document when it was read (read after the list, so newer).
  const done = g ? g.actions.filter((a) => a.state === 'DONE').length : summary.done;
  const total = g ? g.actions.length : summary.total;
  const blockers = g ? g.blockers.length : summary.blockers;
  const state = g ? g.state : summary.state;
  const card = h('article', { class: 'card goal', 'data-goal-id': summary.goal_id, 'aria-label': `Goal: ${summary.objective}` },
    h('h3', {}, summary.objective),
    h('p', { class: 'row' }, badge(h, 'state', state),
      h('span', { class: 'progress-text' }, `${done} of ${total} step${total === 1 ? '' : 's'} done`),
      h('progress', { max: String(Math.max(total, 1)), value: String(done), 'aria-label': 'Progress' }),
      blockers ? h('span', { class: 'badge state-blocked' }, `${blockers} blocker${blockers === 1 ? '' : 's'}`) : null),
    h('dl', { class: 'facts' },
      h('dt', {}, 'Deadline'), h('dd', { class: 'deadline' }, summary.deadline_at ? t(summary.deadline_at) : 'none'),
      g ? [h('dt', {}, 'Risk / autonomy'), h('dd', {}, `${g.risk_level || '–'} / ${g.autonomy || '–'}`)] : null,
      summary.host ? [h('dt', {}, 'Host'), h('dd', { class: 'host' }, hostText(summary.host))] : null,
      (g && g.device_id) || summary.device_id ? [h('dt', {}, 'Phone'), h('dd', {}, (g && g.device_id) || summary.device_id)] : null,
      h('dt', {}, 'Updated'), h('dd', {}, t(summary.updated_at)),
      h('dt', {}, 'Id'), h('dd', {}, h('code', {}, summary.goal_id))));
  if (!g) {
    card.append(h('p', { class: 'muted' }, 'The goal\'s document could not be read.'));
    card.tick = () => times.forEach((el) => el.refresh());
    return card;
  }
  if (g.blockers && g.blockers.length) {
    card.append(h('section', { class: 'blockers', 'aria-label': 'What blocks it' }, h('h4', {}, 'Blocked on'),
      g.blockers.map((b) => h('div', { class: `blocker kind-${b.kind}`, 'data-blocker': b.id, 'data-action': b.action_id || '' },
        h('p', {}, badge(h, 'blocker', b.kind), ' ', b.action_id ? h('strong', {}, `${b.action_id}: `) : null, b.reason,
          ' ', h('span', { class: 'muted' }, '(since ', t(b.since), ')')),
        resolver(ctx, g, b, reload)))));
  }
  card.append(h('section', { class: 'actions', 'aria-label': 'Actions' }, h('h4', {}, 'Actions'),
    h('ol', { class: 'steps' }, g.actions.map((a) => {
      const last = a.attempts && a.attempts.length ? a.attempts[a.attempts.length - 1] : null;
      return h('li', { class: 'step', 'data-action': a.id },
        h('div', { class: 'row' }, badge(h, 'state', a.state), h('strong', {}, a.title || a.id), h('code', { class: 'muted' }, a.id)),
        h('p', { class: 'what' }, actionWhat(h, a)),
        a.kind === 'tool' && a.params ? paramList(h, a.params) : null,
        a.depends_on && a.depends_on.length ? h('p', { class: 'muted' }, `after ${a.depends_on.join(', ')}`) : null,
        last ? h('p', { class: 'muted attempt' }, `attempt ${last.n}: ${last.outcome}${last.summary ? ` — ${last.summary}` : ''}`,
          last.approval_expires_at ? [' · approval expires ', t(last.approval_expires_at)] : null) : null);
    }))));
  if (g.checkpoints && g.checkpoints.length) {
    card.append(h('section', { class: 'checkpoints', 'aria-label': 'Checkpoints' }, h('h4', {}, 'Checkpoints'),
      h('ul', {}, g.checkpoints.map((c) => h('li', {},
        badge(h, 'outcome', c.outcome || 'pending'), ' ', h('strong', {}, c.label || `${c.minutes_before} min before`), ' ',
        c.at ? localTime(c.at) : '', c.contract ? ` — ${c.contract}` : '', c.late ? ' (late)' : '', c.note ? ` — ${c.note}` : '')))));
  }
  const reports = got.reports || [];
  const report = reports[reports.length - 1];
  card.append(h('section', { class: 'report', 'aria-label': 'Last report' }, h('h4', {}, 'Last report'),
    report ? [h('p', { class: 'muted' }, localTime(report.created_at_ms), ` · ${report.channel} · ${report.delivery}`),
      h('div', { class: 'transcript' }, report.text)] : h('p', { class: 'muted' }, 'No report yet.')));
  card.tick = () => times.forEach((el) => el.refresh());
  return card;
}

export function goals(ctx, main) {
  const { h } = ctx;
  main.append(h('h2', {}, 'Goals'));
  if (!ctx.methods.includes('goals.list')) {
    main.append(h('p', { id: 'goals-unavailable', class: 'card' }, 'Goals are not available in this daemon.'));
    return null;
  }
  const list = h('div', { id: 'goal-list' });
  main.append(list);
  let cards = [];
  let gone = false;
  const load = async () => {
    let r;
    try { r = await ctx.rpc.call('goals.list', { limit: 50 }); } catch (e) { list.replaceChildren(h('p', {}, e.message)); return; }
    if (r.goals.length === 0) {
      cards = [];
      list.replaceChildren(h('p', { class: 'muted' },
        'No goals. A goal keeps working toward an objective across approvals and failures until its deadline: ',
        h('code', {}, 'openphone goals create <goal.json>'), ' (see docs/goals.md).'));
      return;
    }
    const docs = await Promise.all(r.goals.map((g) => ctx.rpc.call('goals.get', { goal_id: g.goal_id }).catch(() => null)));
    if (gone) return;
    cards = r.goals.map((g, i) => goalCard(ctx, g, docs[i], load));
    list.replaceChildren(...cards);
  };
  load();
  let timer = null;
  const soon = () => { clearTimeout(timer); timer = setTimeout(load, 150); };
  const offs = [
    ctx.rpc.onEvent((event) => { if (event.startsWith('goal.')) soon(); }),
    ctx.on('inbox', soon),
    ctx.on('tick', () => cards.forEach((c) => c.tick())),
  ];
  return () => { gone = true; clearTimeout(timer); offs.forEach((off) => off()); };
}
