import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { CookieJar, formBody, hiddenFields } from './oauth-flow.js';

/**
 * A person on the account pages through `app.inject`: signs in from an automation's approval page (as the
 * link an assistant got leads there), reads it, and posts its forms as a browser would.
 */
export class AccountBrowser {
  readonly jar = new CookieJar();
  constructor(private readonly app: FastifyInstance) {}

  async get(url: string): Promise<LightMyRequestResponse> {
    const res = await this.app.inject({ method: 'GET', url, headers: { cookie: this.jar.header() } });
    this.jar.store(res);
    return res;
  }

  async post(url: string, fields: Record<string, string | string[]>): Promise<LightMyRequestResponse> {
    const res = await this.app.inject({ method: 'POST', url, headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: this.jar.header() }, payload: formBody(fields) });
    this.jar.store(res);
    return res;
  }

  /** Opens `url` signed out, signs in on the page it shows, and answers the page it goes back to. */
  async signIn(url: string, user: { email: string; password: string }): Promise<LightMyRequestResponse> {
    const first = await this.get(url);
    const signedIn = await this.post('/account/sign-in', { ...hiddenFields(first.body, '/account/sign-in'), email: user.email, password: user.password });
    if (signedIn.statusCode !== 303) throw new Error(`sign-in failed: ${signedIn.statusCode} ${signedIn.body.slice(0, 300)}`);
    return this.get(String(signedIn.headers.location));
  }

  /** Posts the form of `page` that goes to `action`, with its hidden fields (the CSRF token, the version) and `extra`. */
  submit(page: LightMyRequestResponse, action: string, extra: Record<string, string> = {}) {
    return this.post(action, { ...hiddenFields(page.body, action), ...extra });
  }
}

/** A person signs in on the automation's approval page and approves it; answers the response of the form. */
export async function approveOnPage(app: FastifyInstance, user: { email: string; password: string }, automationId: string) {
  const browser = new AccountBrowser(app);
  const page = await browser.signIn(`/account/automations/${automationId}`, user);
  if (page.statusCode !== 200) throw new Error(`approval page: ${page.statusCode} ${page.body.slice(0, 300)}`);
  return browser.submit(page, `/account/automations/${automationId}/approve`);
}
