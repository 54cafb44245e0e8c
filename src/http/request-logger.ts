import type { FastifyBaseLogger } from 'fastify';

type Bindings = Record<string, unknown>;
type ChildOptions = Parameters<FastifyBaseLogger['child']>[1];

const LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace'] as const;
const CHILD = Symbol('child');
const BINDINGS = Symbol('bindings');
const OPTIONS = Symbol('options');

interface Lazy {
  [CHILD]?: FastifyBaseLogger;
  [BINDINGS]: Bindings;
  [OPTIONS]: ChildOptions;
}

/** The request's own child logger, made on first use. */
const childOf = (parent: FastifyBaseLogger, lazy: Lazy) => (lazy[CHILD] ??= parent.child(lazy[BINDINGS], lazy[OPTIONS]));

/** Per parent logger (and its level when it was read): the prototype of its requests' lazy loggers. */
/** pino's check of a level (Fastify's logger type leaves it out). */
const enabled = (logger: FastifyBaseLogger, level: string) => (logger as unknown as { isLevelEnabled(level: string): boolean }).isLevelEnabled(level);

const prototypes = new WeakMap<FastifyBaseLogger, { level: string; proto: object }>();

function prototypeFor(parent: FastifyBaseLogger): object {
  const found = prototypes.get(parent);
  if (found && found.level === parent.level) return found.proto;
  // Everything a logger has (its level, `isLevelEnabled`, the methods of disabled levels, which do nothing)
  // comes from the parent; what writes or derives goes to the request's own child, made then.
  const proto: Record<string, unknown> = Object.create(parent) as Record<string, unknown>;
  for (const level of LEVELS) {
    if (!enabled(parent, level)) continue;
    proto[level] = function (this: Lazy, ...args: unknown[]) {
      return (childOf(parent, this)[level] as (...a: unknown[]) => void)(...args);
    };
  }
  proto.child = function (this: Lazy, bindings: Bindings, options?: ChildOptions) {
    return childOf(parent, this).child(bindings, options);
  };
  proto.bindings = function (this: Lazy) {
    return (childOf(parent, this) as unknown as { bindings(): Bindings }).bindings();
  };
  prototypes.set(parent, { level: parent.level, proto });
  return proto;
}

/**
 * Fastify's `childLoggerFactory`: a request's logger (`req.log`, with its request id) that makes pino's
 * child logger only when the request writes a message at a level the logger writes. Nothing is logged
 * per request unless something goes wrong (access logs are left to the proxy), so most requests never
 * make one. A route with a level or serializers of its own gets its child at once.
 */
export function lazyRequestLogger(parent: FastifyBaseLogger, bindings: Bindings, options: ChildOptions): FastifyBaseLogger {
  // Fastify's null logger (`logger: false`) has no levels: its children are itself.
  if (typeof (parent as { isLevelEnabled?: unknown }).isLevelEnabled !== 'function') return parent.child(bindings, options);
  if (options && (options.level !== undefined || options.serializers !== undefined)) return parent.child(bindings, options);
  const lazy = Object.create(prototypeFor(parent)) as Lazy;
  lazy[BINDINGS] = bindings;
  lazy[OPTIONS] = options;
  return lazy as unknown as FastifyBaseLogger;
}
