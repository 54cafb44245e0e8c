
/**
 * A record's JSON as the database wrote it (`json_build_object(…)::text`), carried to the answer as it is:
 * REST writes it into the body and MCP into the tool result without a parse and a second serialization
 * (PostgREST does the same). The text is PostgreSQL's own JSON output: the same values as the record's
 * schema describes (the statement builds it with `jsonRow`, timestamps as ISO 8601 UTC), written with the
 * spaces PostgreSQL puts after its colons and commas. A caller that needs the values reads `value()`.
 */
/** The shape of an answer's envelope as these functions read it (the `Envelope` of `operation.ts`). */
interface Envelope {
  data: unknown;
  meta?: unknown;
}

export class JsonText {
  constructor(readonly text: string) {}

  value(): unknown {
    return JSON.parse(this.text) as unknown;
  }
}

const isText = (value: unknown): value is JsonText => value instanceof JsonText;

/** Whether an envelope carries database JSON (its `data`, or the items of a list page). */
export function carriesJsonText(envelope: Envelope): boolean {
  const { data } = envelope;
  return isText(data) || (Array.isArray(data) && data.length > 0 && data.every(isText));
}

/** The envelope's JSON text: database JSON spliced in as it is, everything else by `JSON.stringify`. */
export function envelopeJson(envelope: Envelope): string {
  const { data, meta } = envelope;
  const tail = meta === undefined ? '}' : `,"meta":${JSON.stringify(meta)}}`;
  if (isText(data)) return `{"data":${data.text}${tail}`;
  if (Array.isArray(data) && data.length > 0 && data.every(isText)) return `{"data":[${data.map((d) => d.text).join(',')}]${tail}`;
  return JSON.stringify(envelope);
}

/**
 * The envelope's JSON as bytes, the same bytes as `envelopeJson` in UTF-8, written straight into one buffer:
 * the database's texts are copied once, from the strings the driver read. Joining them into one string
 * instead makes JavaScript copy a page's text two or three times more (the join, then the flattening of
 * the concatenation that measuring and writing the body each need), all of it young garbage per request.
 */
export function envelopeBytes(envelope: Envelope): Buffer {
  const { data, meta } = envelope;
  const texts = isText(data) ? [data.text] : Array.isArray(data) && data.length > 0 && data.every(isText) ? data.map((d) => d.text) : undefined;
  if (!texts) return Buffer.from(JSON.stringify(envelope));
  const list = Array.isArray(data);
  const head = list ? '{"data":[' : '{"data":';
  const tail = `${list ? ']' : ''}${meta === undefined ? '}' : `,"meta":${JSON.stringify(meta)}}`}`;
  // The head and the commas between texts are ASCII; the tail (the meta) may not be.
  let size = head.length + texts.length - 1 + Buffer.byteLength(tail);
  for (const text of texts) size += Buffer.byteLength(text);
  const bytes = Buffer.allocUnsafe(size);
  let at = bytes.write(head, 0, 'latin1');
  for (let i = 0; i < texts.length; i++) {
    if (i > 0) at += bytes.write(',', at, 'latin1');
    at += bytes.write(texts[i]!, at, 'utf8');
  }
  bytes.write(tail, at, 'utf8');
  return bytes;
}

/** The value of a handler's answer, database JSON read into values (for callers that use the record). */
export function plainValue(value: unknown): unknown {
  return isText(value) ? value.value() : value;
}
