/**
 * Protected resources (RFC 8707 / RFC 9728) this server issues tokens for: the origin itself and the two
 * transports. Clients send them with or without a trailing slash; the stored form has none.
 */
export function protectedResources(publicUrl: string): string[] {
  const base = normaliseUrl(publicUrl) ?? publicUrl;
  return [base, `${base}/mcp`, `${base}/sse`];
}

/** `scheme://host[:port]/path` without a trailing slash, or undefined for anything that is not an absolute URL
 * without query and fragment (RFC 8707 §2: a resource has no fragment; a query is not used here). */
export function normaliseUrl(raw: string): string | undefined {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return undefined;
  }
  if (url.search || url.hash || raw.includes('#') || url.username || url.password) return undefined;
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return undefined;
  return `${url.origin}${url.pathname.replace(/(?<!\/)\/+$/, '')}`;
}

/** The normalised resource when it is one of ours, else undefined (answered with `invalid_target`). */
export function matchResource(raw: string, publicUrl: string): string | undefined {
  const normalised = normaliseUrl(raw);
  return normalised && protectedResources(publicUrl).includes(normalised) ? normalised : undefined;
}
