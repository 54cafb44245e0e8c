import type { FastifyReply } from 'fastify';
import type { Who } from '../modules/automations/approvals.js';
import { escapeHtml, hiddenFields, layout, minute, sendPage } from './views.js';

/**
 * The automation pages of the account: the approval page of one automation (what the person consents to,
 * from the plan itself) and the organization's list. Plain server-rendered HTML like the consent page: no
 * JavaScript, the one stylesheet of `views.ts` plus the rules below inside it, forms with a CSRF token.
 */

export interface StepView {
  operation: string;
  /** The step's input, rendered for the preview's event (or as written when there is no preview). */
  input: unknown;
}

export interface ApprovalView {
  id: string;
  name: string;
  status: string;
  /** False when a person disabled it (`enabled: false`): an active one does not run then. */
  enabled: boolean;
  statusReason: string | null;
  planSummary: string | null;
  instructions: string;
  /** The trigger or schedule in words, with the time zone. */
  when: string;
  /** How long it may run: runs so far and at most (null: no limit), and when it stops (null: never). */
  life: { currentExecutions: number; maxExecutions: number | null; expiresAt: string | null };
  condition: unknown;
  steps: StepView[];
  /** The dry run the steps were rendered with, or why there is none. */
  preview: { event: { type: string; occurredAt: string } | null; conditionHolds: boolean } | { unavailable: string };
  /** Every address or number outside the organization the plan may send or forward to. */
  external: string[];
  /** Whether the plan answers whoever wrote the triggering message (a reply, or a send to `{{sender.…}}`: an address or number only the message knows). */
  repliesToSender: boolean;
  createdVia: Who | null;
  createdAt: string;
  askedBy: Who | null;
  askedAt: string | null;
  approvedBy: Who | null;
  approvedAt: string | null;
  version: string;
  /** Whether this person may decide now, or why not. */
  decision: { can: true; actsFor: string } | { can: false; reason: string };
}

const who = (w: Who | null) => (w ? `${escapeHtml(w.name)}${w.client ? ` through <strong>${escapeHtml(w.client)}</strong>` : w.type === 'apiKey' ? ' (API key)' : ''}` : 'the service');

/** JSON with every external address or number marked. */
function markedJson(value: unknown, external: readonly string[]): string {
  let html = escapeHtml(JSON.stringify(value, null, 2) ?? 'null');
  for (const address of [...external].sort((a, b) => b.length - a.length)) {
    const escaped = escapeHtml(address);
    html = html.split(escaped).join(`<mark class="external" title="Outside your organization">${escaped}</mark>`);
  }
  return html;
}

/** "3 runs so far, at most 5 (2 left); until 2030-01-07 08:00 UTC" */
function lifeOf(life: ApprovalView['life']): string {
  const runs = `${life.currentExecutions} run${life.currentExecutions === 1 ? '' : 's'} so far, ${
    life.maxExecutions === null ? 'no limit' : `at most ${life.maxExecutions} (${Math.max(0, life.maxExecutions - life.currentExecutions)} left)`
  }`;
  return `${escapeHtml(runs)}; ${life.expiresAt ? `until ${minute(life.expiresAt)}` : 'no end date'}`;
}

const STATUS_WORDS: Record<string, string> = { pending_approval: 'Waiting for approval', paused: 'Paused', failed: 'Failed', active: 'Active', archived: 'Archived' };
const statusWords = (s: string) => STATUS_WORDS[s] ?? s.replaceAll('_', ' ');

export function approvalPage(
  reply: FastifyReply,
  opts: { csrf: string; formOrigin: string; userEmail: string; view: ApprovalView; notice?: string; status?: number },
) {
  const v = opts.view;
  const csrf = hiddenFields({ csrf: opts.csrf, version: v.version });
  const previewNote =
    'unavailable' in v.preview
      ? `<p class="muted">No preview: ${escapeHtml(v.preview.unavailable)} The steps are shown as written.</p>`
      : v.preview.event
        ? `<p class="muted">Preview: a dry run on the latest <code>${escapeHtml(v.preview.event.type)}</code> event (${minute(v.preview.event.occurredAt)}); nothing was sent or changed. On that event the condition ${v.preview.conditionHolds ? 'holds: the steps would run' : 'does not hold: the steps would not run'}.</p>`
        : '<p class="muted">Preview: a dry run for a run now; nothing was sent or changed.</p>';
  const steps = v.steps
    .map((s, i) => `<li><p><strong>Step ${i + 1}</strong>: <code>${escapeHtml(s.operation)}</code></p><pre>${markedJson(s.input, v.external)}</pre></li>`)
    .join('\n');
  const outside = v.external.length
    ? `<div class="alert" role="note" aria-label="Outside your organization"><p><strong>Leaves your organization.</strong> This automation may send or forward to these addresses outside your organization:</p><ul>${v.external
        .map((a) => `<li><mark class="external">${escapeHtml(a)}</mark></li>`)
        .join('')}</ul></div>`
    : '';
  const sender = v.repliesToSender ? '<p class="alert" role="note">It answers whoever wrote the message that triggers it: anyone who can write to you.</p>' : '';
  const pending = v.status === 'pending_approval' || v.status === 'paused' || v.status === 'failed' || (v.status === 'active' && !v.enabled);
  const decide = !pending
    ? `<p class="muted">Nothing to decide: this automation is ${escapeHtml(statusWords(v.status))}.</p>`
    : v.decision.can
      ? `<form method="post" action="/account/automations/${v.id}/approve" class="decide">
${csrf}
<p class="muted">Approving makes it run from now on, acting for you through ${escapeHtml(v.decision.actsFor)}.</p>
<div class="actions"><button class="primary" type="submit">${v.status === 'pending_approval' ? 'Approve' : v.status === 'active' ? 'Enable' : 'Resume'}</button></div>
</form>
${
  v.status === 'pending_approval'
    ? `<form method="post" action="/account/automations/${v.id}/reject" class="decide">
${csrf}
<div class="field"><label for="reason">Reason (optional)</label><input id="reason" name="reason" type="text" maxlength="500"></div>
<div class="actions"><button class="danger" type="submit">Reject</button></div>
</form>`
    : ''
}`
      : `<p class="alert" role="alert">You cannot approve this automation: ${escapeHtml(v.decision.reason)}</p>`;
  const body = `<p><a href="/account/automations">All automations</a></p>
<h1>${escapeHtml(v.name)}</h1>
${opts.notice ? `<p class="alert" role="status">${escapeHtml(opts.notice)}</p>` : ''}
<p><span class="badge">${escapeHtml(statusWords(v.status))}${v.enabled ? '' : ', disabled'}</span>${v.statusReason ? ` <span class="muted">${escapeHtml(v.statusReason)}</span>` : ''}</p>
<p class="muted">Created by ${who(v.createdVia)} ${minute(v.createdAt)}${v.askedBy && v.askedAt ? ` · approval asked by ${who(v.askedBy)} ${minute(v.askedAt)}` : ''}${
    v.approvedBy && v.approvedAt ? ` · last approved by ${who(v.approvedBy)} ${minute(v.approvedAt)}` : ''
  }</p>
<section aria-label="What it does">
<h2>What it does</h2>
<p class="summary">${escapeHtml(v.planSummary ?? 'No plan yet.')}</p>
<dl>
<dt>When</dt><dd>${escapeHtml(v.when)}</dd>
<dt>How long</dt><dd>${lifeOf(v.life)}</dd>
<dt>Condition</dt><dd>${v.condition ? `<pre>${escapeHtml(JSON.stringify(v.condition, null, 2))}</pre>` : 'None: every time'}</dd>
<dt>Instructions</dt><dd>${escapeHtml(v.instructions)}</dd>
</dl>
</section>
${outside}${sender}
<section aria-label="Steps">
<h2>Steps</h2>
${previewNote}
<ol class="steps">${steps}</ol>
</section>
${decide}
<form method="post" action="/account/sign-out">
${hiddenFields({ csrf: opts.csrf })}
<p class="muted">Signed in as ${escapeHtml(opts.userEmail)}. <button class="link" type="submit">Sign out</button></p>
</form>`;
  return sendPage(reply, opts.status ?? 200, layout(`Approve ${v.name}`, body, true), opts.formOrigin);
}

export interface ListedAutomation {
  id: string;
  name: string;
  status: string;
  statusReason: string | null;
  lastRunAt: string | null;
  version: string;
}

export function automationsPage(reply: FastifyReply, opts: { csrf: string; formOrigin: string; userEmail: string; items: ListedAutomation[]; notice?: string; status?: number }) {
  const rows = opts.items
    .map((a) => {
      const csrf = hiddenFields({ csrf: opts.csrf, version: a.version });
      const action = (name: string, label: string, cls = '') => `<form method="post" action="/account/automations/${a.id}/${name}">${csrf}<button type="submit"${cls ? ` class="${cls}"` : ''}>${label}</button></form>`;
      const actions = [
        a.status === 'pending_approval' ? `<a class="button primary" href="/account/automations/${a.id}">Review</a>` : '',
        a.status === 'active' ? action('pause', 'Pause') : '',
        a.status === 'paused' || a.status === 'failed' ? `<a class="button" href="/account/automations/${a.id}">Review and resume</a>` : '',
        a.status !== 'archived' ? action('archive', 'Archive', 'danger') : '',
      ].join('');
      return `<li class="automation" aria-label="${escapeHtml(a.name)}">
<h2><a href="/account/automations/${a.id}">${escapeHtml(a.name)}</a></h2>
<p><span class="badge">${escapeHtml(statusWords(a.status))}</span>${a.statusReason ? ` <span class="muted">${escapeHtml(a.statusReason)}</span>` : ''}</p>
<p class="muted">Last run: ${a.lastRunAt ? minute(a.lastRunAt) : 'never'}</p>
<div class="actions">${actions}</div>
</li>`;
    })
    .join('\n');
  const body = `<h1>Automations</h1>
${opts.notice ? `<p class="alert" role="status">${escapeHtml(opts.notice)}</p>` : ''}
${opts.items.length ? `<ul class="automations">${rows}</ul>` : '<p>Your organization has no automations.</p>'}
<p class="muted"><a href="/account/apps">Connected apps</a></p>
<form method="post" action="/account/sign-out">
${hiddenFields({ csrf: opts.csrf })}
<p class="muted">Signed in as ${escapeHtml(opts.userEmail)}. <button class="link" type="submit">Sign out</button></p>
</form>`;
  return sendPage(reply, opts.status ?? 200, layout('Automations', body, true), opts.formOrigin);
}
