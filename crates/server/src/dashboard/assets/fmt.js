// How the dashboard says things to a person: times in the browser's own zone with the zone
// named and a relative part ("in 4 min"), params as labelled values instead of JSON, command
// names as words. Everything returns DOM built with h (never HTML).

const DATE = new Intl.DateTimeFormat(undefined, {
  weekday: 'short', day: 'numeric', month: 'short', hour: '2-digit', minute: '2-digit', timeZoneName: 'short',
});
const DATE_YEAR = new Intl.DateTimeFormat(undefined, {
  weekday: 'short', day: 'numeric', month: 'short', year: 'numeric', hour: '2-digit', minute: '2-digit', timeZoneName: 'short',
});
const RELATIVE = new Intl.RelativeTimeFormat(undefined, { numeric: 'auto' });

/** A Unix-ms instant as local time with the zone ("Sat 28 Nov, 12:40 UTC"); '–' for none. */
export function localTime(ms) {
  if (!ms) return '–';
  const d = new Date(ms);
  if (Number.isNaN(d.getTime())) return String(ms);
  return (d.getFullYear() === new Date().getFullYear() ? DATE : DATE_YEAR).format(d);
}

/** How far `ms` is from now, in words ("in 4 minutes", "2 hours ago", "now"). */
export function relative(ms, now = Date.now()) {
  const diff = ms - now;
  const abs = Math.abs(diff);
  const units = [['day', 86400000], ['hour', 3600000], ['minute', 60000], ['second', 1000]];
  for (const [unit, size] of units) {
    if (abs >= size || unit === 'second') return RELATIVE.format(Math.round(diff / size), unit);
  }
  return '';
}

/** Local time and relative: "Sat 28 Nov, 12:40 UTC (in 4 minutes)". */
export function when(ms) {
  if (!ms) return '–';
  return `${localTime(ms)} (${relative(ms)})`;
}

/** A <time> element that keeps its relative part current (pass it to a tick). */
export function timeEl(h, ms, cls) {
  const el = h('time', { class: cls || 'when', datetime: ms ? new Date(ms).toISOString() : null }, when(ms));
  el.refresh = () => { el.textContent = when(ms); };
  return el;
}

/** `openphone.messages.send` / `messages_send` → "messages send". */
export function commandWords(tool) {
  if (!tool) return '–';
  return String(tool).replace(/^openphone\./, '').replace(/[._]+/g, ' ').trim();
}

/** `start_at` → "Start at". */
export function label(key) {
  const words = String(key).replace(/_ms$/, '').replace(/[_.]+/g, ' ').trim();
  return words.charAt(0).toUpperCase() + words.slice(1);
}

// Keys that name who a request reaches, most telling first.
const RECIPIENT_KEYS = ['to', 'recipient', 'recipients', 'address', 'number', 'phone_number', 'contact', 'contact_name', 'email', 'chat', 'name'];

/** Whom a request reaches, from its params (null when it names no one). */
export function recipient(params) {
  if (!params || typeof params !== 'object') return null;
  for (const k of RECIPIENT_KEYS) {
    const v = params[k];
    if (v === undefined || v === null || v === '') continue;
    return Array.isArray(v) ? v.join(', ') : String(v);
  }
  return null;
}

/** Whether a param is a time: an `…_at`/`…_ms`/`…time` key holding Unix ms. */
function isTime(key, value) {
  return typeof value === 'number' && value > 1e11 && value < 1e14 && /(_at|_ms|time|deadline|until)$/i.test(key);
}

/** One param's value as a person reads it. */
export function humanValue(key, value) {
  if (value === null || value === undefined) return '–';
  if (isTime(key, value)) return when(value);
  if (typeof value === 'boolean') return value ? 'yes' : 'no';
  if (Array.isArray(value) && value.every((v) => typeof v !== 'object' || v === null)) return value.join(', ');
  if (typeof value === 'object') {
    return Object.entries(value).map(([k, v]) => `${label(k)}: ${typeof v === 'object' && v !== null ? JSON.stringify(v) : humanValue(k, v)}`).join('; ');
  }
  return String(value);
}

/** Params as a labelled list (<dl>), the `reason` first as "Why". */
export function paramList(h, params) {
  if (!params || typeof params !== 'object' || Object.keys(params).length === 0) return null;
  const entries = Object.entries(params).sort(([a], [b]) => (a === 'reason' ? -1 : b === 'reason' ? 1 : 0));
  return h('dl', { class: 'params' }, entries.map(([k, v]) => [
    h('dt', {}, k === 'reason' ? 'Why' : label(k)),
    h('dd', {}, humanValue(k, v)),
  ]));
}

/** A folded block of technical fields (digests, ids) and the raw record. */
export function folded(h, title, fields, raw) {
  const rows = Object.entries(fields).filter(([, v]) => v !== undefined && v !== null && v !== '');
  return h('details', { class: 'tech' },
    h('summary', {}, title),
    rows.length ? h('dl', { class: 'params mono' }, rows.map(([k, v]) => [h('dt', {}, k), h('dd', {}, String(v))])) : null,
    raw !== undefined ? h('pre', { class: 'raw' }, JSON.stringify(raw, null, 2)) : null);
}

/** A table that becomes one card per row at phone width (app.css `table.cards`): each cell
 *  carries its column's name (`data-label`). `rows`: `[{attrs, cells: [content…]}]`. */
/** A fleet row's daemon (`host` of `jobs.list`, `inbox.list`, `goals.list`): the host that made
 *  it, and `→ <host>` when another daemon's claim runs (or last ran) it. '' off a fleet. */
export function hostText(host) {
  if (!host) return '';
  const runner = host.lease_owner && host.lease_owner !== host.host_id ? ` → ${host.lease_owner}` : '';
  return `${host.host_id}${runner}`;
}

export function dataTable(h, headers, rows, attrs = {}) {
  const { caption, ...rest } = attrs;
  return h('table', { ...rest, class: `cards ${rest.class || ''}`.trim() },
    caption ? h('caption', { class: 'muted' }, caption) : null,
    h('thead', {}, h('tr', {}, headers.map((t) => h('th', { scope: 'col' }, t)))),
    h('tbody', {}, rows.map((r) => h('tr', r.attrs || {}, r.cells.map((c, i) => h('td', { 'data-label': headers[i] || '' }, h('span', { class: 'cell' }, c)))))));
}

// What a command does, as a person says it (the commonest; the rest read as their words).
const PHRASES = {
  'messages.send': 'Send a message', 'messages.draft': 'Draft a message', 'calendar.create': 'Add a calendar event',
  'calendar.update': 'Change a calendar event', 'calendar.delete': 'Delete a calendar event', 'contacts.create': 'Add a contact',
  'contacts.update': 'Change a contact', 'calls.place': 'Place a call', 'ui.tap': 'Tap the screen', 'ui.type': 'Type on the phone',
  'app.open': 'Open an app', 'notifications.open': 'Open a notification', 'clipboard.set': 'Put text on the clipboard',
  'share.text': 'Share text', 'alarms.set': 'Set an alarm', 'reminders.create': 'Add a reminder',
};

/** "Send a message to +49 151 …" from a command (canonical or model-tool name) and its params. */
export function actionPhrase(tool, params) {
  const key = String(tool || '').replace(/^openphone\./, '').replace(/_/g, '.');
  const words = PHRASES[key] || (() => { const w = commandWords(tool); return w.charAt(0).toUpperCase() + w.slice(1); })();
  const to = recipient(params);
  return to ? `${words} to ${to}` : words;
}

/** Whether a stored summary is fit to show a person (not a JSON dump). */
export function readable(summary) {
  return !!summary && !/[{[]"|\\"/.test(summary);
}

/** An identifier (`openphone.messages.send`, `confirmation_transition`) that may break after
 *  its dots and underscores only, not inside a word. */
export function ident(h, text) {
  if (text === null || text === undefined || text === '') return '–';
  return String(text).split(/(?<=[._])/).flatMap((part, i) => (i ? [h('wbr'), part] : [part]));
}
