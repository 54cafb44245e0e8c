
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

/** The value of a handler's answer, database JSON read into values (for callers that use the record). */
export function plainValue(value: unknown): unknown {
  return isText(value) ? value.value() : value;
}
