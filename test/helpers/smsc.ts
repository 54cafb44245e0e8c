import type { AddressInfo } from 'node:net';
import smpp from 'smpp';

/**
 * A real SMSC in the test process: the `smpp` package's server, answering bind_transceiver (with the
 * accounts given; anything else ESME_RINVPASWD), submit_sm (message ids in hex or decimal, scripted
 * refusals), enquire_link and unbind, and delivering deliver_sm (texts, parts, receipts) to the bound ESME.
 */

export interface Submitted {
  pdu: smpp.PDU;
  messageId: string;
  /** The text as the SMSC read it, and the UDH's concatenation IE when there is one. */
  text: string;
  udh: Buffer | undefined;
}

export interface FakeSmsc {
  port: number;
  /** Binds accepted, binds refused, in all. */
  binds: { accepted: number; refused: number };
  /** Sessions bound now. */
  bound(): smpp.Session[];
  submits: Submitted[];
  /** Statuses the next submit_sm get, in order (then 0). */
  refuseNext: number[];
  /** The id the next accepted submit gets: hex ("1a2b…") or decimal. */
  idFormat: 'hex' | 'decimal';
  /** Called after each accepted bind is answered. */
  afterBind: (() => void) | undefined;
  /** false: enquire_link goes unanswered (a dead SMSC behind an open connection). */
  answerEnquireLink: boolean;
  /** Called after each accepted submit_sm is answered (e.g. to send its receipt at once). */
  afterSubmit: ((submitted: Submitted, session: smpp.Session) => void) | undefined;
  /** Awaited before an accepted submit_sm is answered (e.g. to send its receipt first). */
  beforeSubmitAnswer: ((submitted: Submitted, session: smpp.Session) => Promise<void>) | undefined;
  /** Sends a deliver_sm to the bound ESME; resolves with its deliver_sm_resp's command_status. */
  deliver(params: Record<string, unknown>, timeoutMs?: number): Promise<number>;
  /**
   * Sends every deliver_sm as fast as TCP allows (waiting only while the socket's buffer is full), without
   * waiting for answers; resolves with each one's deliver_sm_resp status in order, undefined for those not
   * answered within `timeoutMs` (or before the connection closed).
   */
  flood(list: Record<string, unknown>[], timeoutMs?: number): Promise<(number | undefined)[]>;
  /** Drops every connection (as a network failure would). */
  drop(): void;
  /** Waits until `check` holds (polling), or throws after `timeoutMs`. */
  until(check: () => boolean, timeoutMs?: number, what?: string): Promise<void>;
  close(): Promise<void>;
}

export async function startSmsc(accounts: Record<string, string>, tls?: { key: string; cert: string }): Promise<FakeSmsc> {
  const bound = new Set<smpp.Session>();
  let counter = 0x5a000 + Math.floor(Math.random() * 0x10000);
  const smsc: FakeSmsc = {
    port: 0,
    binds: { accepted: 0, refused: 0 },
    bound: () => [...bound],
    submits: [],
    refuseNext: [],
    idFormat: 'hex',
    afterSubmit: undefined,
    beforeSubmitAnswer: undefined,
    afterBind: undefined,
    answerEnquireLink: true,
    deliver(params, timeoutMs = 10_000) {
      const session = [...bound][0];
      if (!session) return Promise.reject(new Error('No ESME is bound'));
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error('No deliver_sm_resp')), timeoutMs);
        session.deliver_sm(params, (resp) => {
          clearTimeout(timer);
          resolve(resp.command_status);
        });
      });
    },
    async flood(list, timeoutMs = 120_000) {
      const session = [...bound][0];
      if (!session) throw new Error('No ESME is bound');
      const statuses: (number | undefined)[] = Array.from({ length: list.length }, () => undefined);
      let answered = 0;
      let allAnswered!: () => void;
      const all = new Promise<void>((resolve) => (allAnswered = resolve));
      const closed = new Promise<void>((resolve) => session.socket.once('close', () => resolve()));
      for (let i = 0; i < list.length; i++) {
        session.deliver_sm(list[i]!, (resp) => {
          statuses[i] = resp.command_status;
          if (++answered === list.length) allAnswered();
        });
        if (session.socket.writableNeedDrain) await Promise.race([new Promise<void>((resolve) => session.socket.once('drain', () => resolve())), closed]);
      }
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([all, closed, new Promise((resolve) => (timer = setTimeout(resolve, timeoutMs)))]);
      clearTimeout(timer);
      return statuses;
    },
    drop() {
      for (const s of server.sessions) s.destroy();
      bound.clear();
    },
    async until(check, timeoutMs = 10_000, what = 'condition') {
      const end = Date.now() + timeoutMs;
      while (!check()) {
        if (Date.now() > end) throw new Error(`Timed out waiting for ${what}`);
        await new Promise((r) => setTimeout(r, 20));
      }
    },
    close: () =>
      new Promise<void>((resolve) => {
        smsc.drop();
        server.close(() => resolve());
      }),
  };

  const server = smpp.createServer(tls ?? {}, (session) => {
    session.on('error', () => {});
    session.on('close', () => bound.delete(session));
    session.on('bind_transceiver', (pdu: smpp.PDU) => {
      const ok = typeof pdu.system_id === 'string' && accounts[pdu.system_id] === pdu.password;
      if (!ok) {
        smsc.binds.refused++;
        session.send(pdu.response({ command_status: accounts[String(pdu.system_id)] === undefined ? smpp.ESME_RINVSYSID : smpp.ESME_RINVPASWD }));
        return;
      }
      smsc.binds.accepted++;
      bound.add(session);
      session.send(pdu.response({ system_id: 'FAKESMSC' }));
      smsc.afterBind?.();
    });
    session.on('submit_sm', (pdu: smpp.PDU) => {
      const status = smsc.refuseNext.shift() ?? 0;
      if (status !== 0) return void session.send(pdu.response({ command_status: status }));
      const n = ++counter;
      const messageId = smsc.idFormat === 'hex' ? n.toString(16) : String(n);
      const sm = pdu.short_message as smpp.DecodedMessage;
      const udh = sm.udh?.find((ie) => ie[0] === 0 || ie[0] === 8);
      const submitted = { pdu, messageId, text: typeof sm.message === 'string' ? sm.message : sm.message.toString('latin1'), udh };
      smsc.submits.push(submitted);
      const answer = () => {
        session.send(pdu.response({ message_id: messageId }));
        smsc.afterSubmit?.(submitted, session);
      };
      if (smsc.beforeSubmitAnswer) void smsc.beforeSubmitAnswer(submitted, session).then(answer);
      else answer();
    });
    session.on('enquire_link', (pdu: smpp.PDU) => {
      if (smsc.answerEnquireLink) session.send(pdu.response());
    });
    session.on('unbind', (pdu: smpp.PDU) => {
      bound.delete(session);
      session.send(pdu.response());
      session.close();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  smsc.port = (server.address() as AddressInfo).port;
  return smsc;
}

/** A receipt's text in the form SMSCs send (SMPP 3.4 appendix B). */
export const receiptText = (id: string, stat: string, err = '000') => `id:${id} sub:001 dlvrd:${stat === 'DELIVRD' ? '001' : '000'} submit date:2611261200 done date:2611261201 stat:${stat} err:${err} text:`;
