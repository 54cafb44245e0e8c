/** The part of `smpp` 0.5.x (which ships no type declarations) this service and its tests use. */
declare module 'smpp' {
  import type { EventEmitter } from 'node:events';
  import type { Server as NetServer, Socket } from 'node:net';

  // The package is CommonJS with its constants added in loops: one default export (`import smpp from 'smpp'`).
    export = smpp;

  namespace smpp {

  /** A decoded `short_message` / `message_payload`: the text, and the UDH's information elements when the UDHI bit is set. */
    export interface DecodedMessage {
    message: string | Buffer;
    udh?: Buffer[];
  }

  /** A PDU as the package reads and writes it: the header, then each parameter and TLV by its name. */
    export interface PDU {
    command: string;
    command_id: number;
    command_status: number;
    sequence_number: number;
    [param: string]: unknown;
    isResponse(): boolean;
    response(options?: Record<string, unknown>): PDU;
    /** The PDU's bytes as sent. */
    toBuffer(): Buffer;
  }

    export interface SessionOptions {
    host?: string;
    port?: number;
    tls?: boolean;
    servername?: string;
    rejectUnauthorized?: boolean;
    auto_enquire_link_period?: number;
    socket?: Socket;
  }

    export class Session extends EventEmitter {
    constructor(options: SessionOptions);
    socket: Socket;
    server?: Server;
    /** Sends a PDU; `false` when the socket is not writable. */
    send(pdu: PDU, responseCallback?: (pdu: PDU) => void, sendCallback?: (pdu: PDU) => void): boolean;
    close(callback?: () => void): void;
    destroy(callback?: () => void): void;
    pause(): void;
    resume(): void;
    bind_transceiver(options: Record<string, unknown>, responseCallback?: (pdu: PDU) => void): boolean;
    submit_sm(options: Record<string, unknown>, responseCallback?: (pdu: PDU) => void): boolean;
    deliver_sm(options: Record<string, unknown>, responseCallback?: (pdu: PDU) => void): boolean;
    enquire_link(options?: Record<string, unknown>, responseCallback?: (pdu: PDU) => void): boolean;
    unbind(options?: Record<string, unknown>, responseCallback?: (pdu: PDU) => void): boolean;
  }

    export interface Server extends NetServer {
    sessions: Session[];
  }

    export function connect(options: SessionOptions, listener?: () => void): Session;
    export function createServer(options: { key?: string | Buffer; cert?: string | Buffer }, listener?: (session: Session) => void): Server;
    export function createServer(listener?: (session: Session) => void): Server;

    export const PDU: {
      new (command: string, options?: Record<string, unknown>): PDU;
      /** The largest PDU a session reads (bytes); a longer one is a session error. */
      maxLength: number;
    };

    export const ESME_ROK: number;
    export const ESME_RBINDFAIL: number;
    export const ESME_RINVPASWD: number;
    export const ESME_RINVSYSID: number;
    export const ESME_RTHROTTLED: number;
    export const ESME_RSYSERR: number;
    export const ESME_RX_T_APPN: number;
    export const ESME_RMSGQFUL: number;
    export const ESME_RSUBMITFAIL: number;
    export const ESME_RINVDSTADR: number;
    export const errors: Record<string, number>;
  }
}
