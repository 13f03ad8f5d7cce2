/**
 * Every line of one header, from Node's `rawHeaders` (name, value, name,
 * value, ...), so a header sent twice is seen as two lines rather than as
 * the comma-joined string `headers` holds.
 */
export function headerLines(rawHeaders: readonly string[], name: string): string[] {
  const lower = name.toLowerCase();
  const lines: string[] = [];
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    if ((rawHeaders[i] as string).toLowerCase() === lower) lines.push(rawHeaders[i + 1] as string);
  }
  return lines;
}
