import { createHash } from 'node:crypto';
import { isDocumentClientId } from './client-documents.js';
import type { FastifyHelmetOptions } from '@fastify/helmet';
import type { FastifyReply } from 'fastify';
import { CATEGORIES, isCategory, type Category } from '../core/categories.js';

/** The pages of the authorization step: plain server-rendered HTML, no JavaScript, one inline stylesheet. */

const CSS = `
:root{color-scheme:light dark;font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;line-height:1.5}
body{margin:0;background:Canvas;color:CanvasText}
main{max-width:30rem;margin:3rem auto;padding:0 1.25rem}
main.wide{max-width:60rem;margin-top:2rem}
h1{font-size:1.4rem;margin:0 0 1rem}
label{font-weight:600}
.field{display:flex;flex-direction:column;gap:.25rem;margin:0 0 1rem}
input[type=email],input[type=password]{font:inherit;padding:.55rem .6rem;border:1px solid GrayText;border-radius:.4rem}
fieldset{border:1px solid GrayText;border-radius:.5rem;margin:0 0 1.25rem;padding:.5rem 1rem}
legend{font-weight:600;padding:0 .3rem}
.category{display:grid;grid-template-columns:auto 1fr;column-gap:.6rem;align-items:start;margin:0;padding:.3rem 0}
.category input{margin-top:.3rem;width:1.1rem;height:1.1rem}
.category p{grid-column:2;margin:0;font-size:.85rem;line-height:1.3;opacity:.8}
.category .sub{grid-column:2;display:grid;grid-template-columns:auto 1fr;column-gap:.5rem;align-items:start;margin-top:.3rem}
.actions{display:flex;gap:.75rem}
button{font:inherit;font-weight:600;padding:.55rem 1.3rem;border-radius:.4rem;border:1px solid GrayText;background:ButtonFace;color:ButtonText;cursor:pointer}
button.primary{background:#1d4ed8;border-color:#1d4ed8;color:#fff}
button:focus-visible,input:focus-visible{outline:3px solid #f59e0b;outline-offset:2px}
.alert{border:1px solid #b91c1c;border-radius:.4rem;padding:.6rem .8rem;margin:0 0 1rem;color:#b91c1c}
.muted{font-size:.9rem;opacity:.8}
.link{background:none;border:none;padding:0;color:LinkText;text-decoration:underline;font-weight:400}
code{overflow-wrap:anywhere}
.consent{display:grid;gap:0 2rem}
.consent fieldset{margin-bottom:1rem}
@media (min-width:48rem){.consent{grid-template-columns:minmax(0,2fr) minmax(0,1fr);align-items:start}.consent .categories{column-count:2;column-gap:1.25rem}.consent .category{break-inside:avoid}}
button.danger{background:#b91c1c;border-color:#b91c1c;color:#fff}
.danger-zone{margin:1.25rem 0 0;padding:1rem 0 0;border-top:1px solid GrayText}
.danger-zone p{margin:0 0 .6rem}
section.app{border:1px solid GrayText;border-radius:.5rem;padding:0 1rem 1rem;margin:0 0 1.5rem}
input[type=text]{font:inherit;padding:.55rem .6rem;border:1px solid GrayText;border-radius:.4rem}
pre{white-space:pre-wrap;overflow-wrap:anywhere;font-size:.85rem;border:1px solid GrayText;border-radius:.4rem;padding:.5rem .7rem;margin:.3rem 0}
mark.external{background:#fde68a;color:#7c2d12;font-weight:700;padding:0 .15rem;border-radius:.2rem}
.badge{display:inline-block;font-size:.85rem;font-weight:600;border:1px solid GrayText;border-radius:1rem;padding:0 .6rem}
dl{display:grid;grid-template-columns:max-content minmax(0,1fr);gap:.3rem 1rem}
dt{font-weight:600}
dd{margin:0}
@media (max-width:30rem){dl{grid-template-columns:minmax(0,1fr)}}
ol.steps{padding-left:1.2rem}
form.decide{margin:1rem 0}
ul.automations{list-style:none;padding:0}
li.automation{border:1px solid GrayText;border-radius:.5rem;padding:0 1rem .8rem;margin:0 0 1rem}
li.automation h2{font-size:1.1rem}
.actions{flex-wrap:wrap}
a.button{font-weight:600;padding:.55rem 1.3rem;border-radius:.4rem;border:1px solid GrayText;text-decoration:none;color:ButtonText;background:ButtonFace}
a.button.primary{background:#1d4ed8;border-color:#1d4ed8;color:#fff}
`;
const CSS_HASH = `'sha256-${createHash('sha256').update(CSS).digest('base64')}'`;

export const escapeHtml = (s: string) =>
  s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

/** Where the browser may be sent after a form: this origin and the client's redirect target. */
function formTarget(redirectUri: string | undefined): string[] {
  if (!redirectUri) return ["'none'"];
  try {
    const url = new URL(redirectUri);
    return ["'self'", url.protocol === 'http:' || url.protocol === 'https:' ? url.origin : url.protocol];
  } catch {
    return ["'self'"];
  }
}

/**
 * The security headers of every page, set by helmet (registered for the OAuth routes with these options):
 * no framing (clickjacking), no sniffing, no referrer leaking the query, and helmet's other defaults. Left
 * out on purpose: HSTS, which belongs to the TLS terminator in front (a self-hosted domain's subdomains are
 * not ours to pin), and Cross-Origin-Opener-Policy, which would cut a client's popup off from the page it
 * opened when the browser comes back to its redirect URI. The Content-Security-Policy is per page (below).
 */
export const PAGE_HEADERS: FastifyHelmetOptions = {
  global: false,
  hsts: false,
  crossOriginOpenerPolicy: false,
  frameguard: { action: 'deny' },
  referrerPolicy: { policy: 'no-referrer' },
  contentSecurityPolicy: false,
};

/** Sends a page with its headers: the policy allows its one stylesheet and form posts to here and the client only; nothing is cached. */
export function sendPage(reply: FastifyReply, status: number, html: string, redirectUri?: string) {
  reply.helmet({
    contentSecurityPolicy: {
      useDefaults: false,
      directives: { defaultSrc: ["'none'"], styleSrc: [CSS_HASH], formAction: formTarget(redirectUri), frameAncestors: ["'none'"], baseUri: ["'none'"] },
    },
  });
  return reply.code(status).header('content-type', 'text/html; charset=utf-8').header('cache-control', 'no-store').header('pragma', 'no-cache').send(html);
}

export function layout(title: string, body: string, wide = false) {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex">
<title>${escapeHtml(title)} · Switchboard</title>
<style>${CSS}</style>
</head>
<body>
<main${wide ? ' class="wide"' : ''}>
${body}
</main>
</body>
</html>
`;
}

export const hiddenFields = (fields: Record<string, string>) =>
  Object.entries(fields)
    .map(([name, value]) => `<input type="hidden" name="${escapeHtml(name)}" value="${escapeHtml(value)}">`)
    .join('\n');

/** What the user sees of the client: its self-declared name, and (harder to fake) where it sends the answer. */
export interface ClientView {
  name: string;
  redirectHost: string;
  /** For a client known by its metadata document: the host that publishes it (the name is still self-declared). */
  publisher?: string;
}

/** A sentence naming who publishes the client's metadata document, or nothing for a registered client. */
const publishedBy = (client: ClientView) =>
  client.publisher ? ` Its description is published at <code>${escapeHtml(client.publisher)}</code>.` : '';

export function clientView(clientName: string | null, clientId: string, redirectUri: string): ClientView {
  let host = redirectUri;
  try {
    const url = new URL(redirectUri);
    host = url.protocol === 'http:' || url.protocol === 'https:' ? url.host : `${url.protocol}${url.host ? `//${url.host}` : ''}`;
  } catch {
    // Registered URIs always parse; keep the raw text otherwise.
  }
  const publisher = isDocumentClientId(clientId) && URL.canParse(clientId) ? new URL(clientId).host : undefined;
  return { name: clientName?.trim() || `Unnamed client ${clientId}`, redirectHost: host, ...(publisher ? { publisher } : {}) };
}

export function signInPage(
  reply: FastifyReply,
  opts: { client: ClientView; params: Record<string, string>; csrf: string; redirectUri: string; error?: string; email?: string; status?: number },
) {
  const body = `<h1>Sign in to Switchboard</h1>
<p><strong>${escapeHtml(opts.client.name)}</strong> wants to connect to your Switchboard account. Sign in to continue.${publishedBy(opts.client)}</p>
${opts.error ? `<p class="alert" role="alert" id="sign-in-error">${escapeHtml(opts.error)}</p>` : ''}
<form method="post" action="/oauth/authorize/sign-in">
${hiddenFields({ ...opts.params, csrf: opts.csrf })}
<div class="field"><label for="email">Email</label>
<input id="email" name="email" type="email" autocomplete="username" required autofocus value="${escapeHtml(opts.email ?? '')}"${opts.error ? ' aria-describedby="sign-in-error" aria-invalid="true"' : ''}></div>
<div class="field"><label for="password">Password</label>
<input id="password" name="password" type="password" autocomplete="current-password" required${opts.error ? ' aria-describedby="sign-in-error" aria-invalid="true"' : ''}></div>
<div class="actions"><button class="primary" type="submit">Sign in</button></div>
</form>`;
  return sendPage(reply, opts.status ?? 200, layout('Sign in', body), opts.redirectUri);
}

export function consentPage(
  reply: FastifyReply,
  opts: { client: ClientView; params: Record<string, string>; csrf: string; redirectUri: string; userEmail: string; offline: boolean },
) {
  const categories = CATEGORIES.map(
    (c) => `<div class="category">
<input type="checkbox" id="category-${c.id}" name="categories" value="${c.id}" aria-describedby="category-${c.id}-description">
<label for="category-${c.id}">${c.id}</label>
<p id="category-${c.id}-description">${escapeHtml(c.description)}</p>${c.id === 'messages' ? sendChoice('send', false, 'send-help') : ''}
</div>`,
  ).join('\n');
  const hidden = hiddenFields({ ...opts.params, csrf: opts.csrf });
  const body = `<h1>Allow access?</h1>
<p><strong>${escapeHtml(opts.client.name)}</strong> wants to use Switchboard tools on your behalf.${publishedBy(opts.client)}</p>
<p class="muted">After your answer you will be sent to <code>${escapeHtml(opts.client.redirectHost)}</code>. Anyone can register an application here under any name: only continue if you started this from that application, at that address.${
    opts.offline ? ' It asks to stay connected: it may renew its access for up to 90 days without asking again.' : ''
  }</p>
<form method="post" action="/oauth/authorize/consent" class="consent">
${hidden}
<fieldset class="categories">
<legend>Tool categories it may use</legend>
${categories}
</fieldset>
<div>
${accessChoice('access', false)}
<p class="muted">With no category ticked the application is connected but sees no tools. You can change the categories later at <code>/account/apps</code>.</p>
<p class="muted" id="send-help">Sending is a consent of its own: without it the application cannot send, reply or forward, and automations that send need it from whoever approves them.</p>
<div class="actions">
<button class="primary" type="submit" name="decision" value="approve">Approve</button>
<button type="submit" name="decision" value="deny">Deny</button>
</div>
</div>
</form>
<form method="post" action="/oauth/authorize/sign-out">
${hidden}
<p class="muted">Signed in as ${escapeHtml(opts.userEmail)}. <button class="link" type="submit">Use another account</button></p>
</form>`;
  // Two columns on a laptop's screen: the categories beside the access choice and the buttons, all in view.
  return sendPage(reply, 200, layout('Allow access', body, true), opts.redirectUri);
}

/** What a consent or connected-apps form chose: the ticked categories (known ones, once each), read only, and the sending consent. */
export function grantChoice(body: Record<string, unknown>): { categories: Category[]; readOnly: boolean; send: boolean } {
  const ticked = ([] as unknown[]).concat(body.categories ?? []).filter((c): c is string => typeof c === 'string');
  return { categories: [...new Set(ticked.filter(isCategory))] as Category[], readOnly: body.access === 'read', send: body.send === 'yes' && body.access !== 'read' && ticked.includes('messages') };
}

/** The label of the sending consent, as CONTRACT §8 names it. */
export const SEND_CONSENT_LABEL = 'Send email and text messages on your behalf';

/**
 * The sending consent, its own line under `messages` (unchecked unless given before): without it the app
 * reads and writes messages but every send, reply and forward is refused.
 */
function sendChoice(id: string, checked: boolean, help?: string) {
  return `<div class="sub">
<input type="checkbox" id="${id}" name="send" value="yes"${checked ? ' checked' : ''} aria-describedby="${help ?? `${id}-description`}">
<label for="${id}">${SEND_CONSENT_LABEL}</label>${help ? '' : `\n<p id="${id}-description">${SEND_CONSENT_HELP}</p>`}
</div>`;
}

const SEND_CONSENT_HELP =
  'Needs messages, read and change. Without it the app reads and files messages but cannot send, reply or forward; automations that send need it from the person who approves them.';

/**
 * Read and write, or read only: radio buttons (the categories are the only checkboxes), read and write
 * chosen unless the grant is already read-only. Read only leaves the tools that change nothing.
 */
function accessChoice(idPrefix: string, readOnly: boolean) {
  return `<fieldset>
<legend>What it may do with them</legend>
<div class="category"><input type="radio" id="${idPrefix}-write" name="access" value="write"${readOnly ? '' : ' checked'}>
<label for="${idPrefix}-write">Read and change</label></div>
<div class="category"><input type="radio" id="${idPrefix}-read" name="access" value="read"${readOnly ? ' checked' : ''}>
<label for="${idPrefix}-read">Read only</label>
<p>Only the tools that look things up: nothing is created, changed or deleted.</p></div>
</fieldset>`;
}

export function errorPage(reply: FastifyReply, status: number, title: string, message: string) {
  const body = `<h1>${escapeHtml(title)}</h1>
<p role="alert">${escapeHtml(message)}</p>
<p class="muted">Return to the application you came from and start again.</p>`;
  return sendPage(reply, status, layout(title, body));
}

/** The sign-in of the account pages (no client involved): posts to /account/sign-in. */
export function accountSignInPage(reply: FastifyReply, opts: { csrf: string; formOrigin: string; error?: string; email?: string; status?: number; next?: string }) {
  const automations = opts.next?.startsWith('/account/automations') === true;
  const body = `<h1>${automations ? 'Automations' : 'Connected apps'}</h1>
<p>${automations ? "Sign in to review your organization's automations: what they do, and which wait for your approval." : 'Sign in to see and control the applications and assistants you connected to Switchboard.'}</p>
${opts.error ? `<p class="alert" role="alert" id="sign-in-error">${escapeHtml(opts.error)}</p>` : ''}
<form method="post" action="/account/sign-in">
${hiddenFields({ csrf: opts.csrf, ...(opts.next ? { next: opts.next } : {}) })}
<div class="field"><label for="email">Email</label>
<input id="email" name="email" type="email" autocomplete="username" required autofocus value="${escapeHtml(opts.email ?? '')}"></div>
<div class="field"><label for="password">Password</label>
<input id="password" name="password" type="password" autocomplete="current-password" required></div>
<div class="actions"><button class="primary" type="submit">Sign in</button></div>
</form>`;
  return sendPage(reply, opts.status ?? 200, layout(automations ? 'Automations' : 'Connected apps', body), opts.formOrigin);
}

export interface ConnectedApp {
  grantId: string;
  client: ClientView;
  categories: readonly string[];
  readOnly: boolean;
  send: boolean;
  approvedAt: string;
  lastTokenAt: string | null;
}

/** A moment to the minute, in UTC (`2026-11-25 17:04 UTC`), in a `<time>` element carrying the full timestamp. */
export const minute = (iso: string) => `<time datetime="${escapeHtml(iso)}">${escapeHtml(iso.slice(0, 10))} ${escapeHtml(iso.slice(11, 16))} UTC</time>`;

/** The signed-in person's connected apps: categories to change, a revoke button each, and a sign-out. */
export function appsPage(reply: FastifyReply, opts: { csrf: string; formOrigin: string; userEmail: string; apps: ConnectedApp[]; notice?: string; status?: number }) {
  const csrf = hiddenFields({ csrf: opts.csrf });
  const apps = opts.apps.length
    ? opts.apps
        .map((app) => {
          const boxes = CATEGORIES.map(
            (c) =>
              `<div class="category"><input type="checkbox" id="c-${app.grantId}-${c.id}" name="categories" value="${c.id}"${app.categories.includes(c.id) ? ' checked' : ''}>
<label for="c-${app.grantId}-${c.id}">${c.id}</label>${c.id === 'messages' ? sendChoice(`send-${app.grantId}`, app.send) : ''}</div>`,
          ).join('\n');
          return `<section class="app" aria-label="${escapeHtml(app.client.name)}">
<h2>${escapeHtml(app.client.name)}</h2>
<p class="muted">Sends you back to <code>${escapeHtml(app.client.redirectHost)}</code> · approved ${minute(app.approvedAt)} · last connected ${app.lastTokenAt ? minute(app.lastTokenAt) : 'never'}</p>
<form method="post" action="/account/apps/${app.grantId}/categories">
${csrf}
<fieldset><legend>Tool categories it may use</legend>
${boxes}
</fieldset>
${accessChoice(`access-${app.grantId}`, app.readOnly)}
<div class="actions"><button class="primary" type="submit">Save</button></div>
</form>
<form method="post" action="/account/apps/${app.grantId}/revoke" class="danger-zone">
${csrf}
<p class="muted">Revoking signs ${escapeHtml(app.client.name)} out at once: its tokens stop working, and it has to ask for your consent again.</p>
<div class="actions"><button class="danger" type="submit">Revoke access</button></div>
</form>
</section>`;
        })
        .join('\n')
    : '<p>No application is connected.</p>';
  const body = `<h1>Connected apps</h1>
${opts.notice ? `<p class="alert" role="status">${escapeHtml(opts.notice)}</p>` : ''}
${apps}
<form method="post" action="/account/sign-out">
${csrf}
<p class="muted">Signed in as ${escapeHtml(opts.userEmail)}. <button class="link" type="submit">Sign out</button></p>
</form>`;
  return sendPage(reply, opts.status ?? 200, layout('Connected apps', body), opts.formOrigin);
}
