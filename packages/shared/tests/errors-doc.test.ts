import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { ERROR_CODES, type ErrorCode } from '@relayplane/contract/errors';
import { grpc } from '@relayplane/proto/grpc';
import { describe, expect, it } from 'vitest';

const DOC = fileURLToPath(new URL('../../../docs/errors.md', import.meta.url));

interface Row {
  code: string;
  http: number;
  grpc: string;
  when: string;
}

/** Rows of the table whose header starts with `| code |`. */
function parseTable(markdown: string): Row[] {
  const lines = markdown.split('\n');
  const header = lines.findIndex((l) => /^\|\s*code\s*\|/.test(l));
  if (header < 0) throw new Error('docs/errors.md has no table starting with "| code |"');
  const rows: Row[] = [];
  for (const line of lines.slice(header + 2)) {
    if (!line.startsWith('|')) break;
    const cells = line
      .split('|')
      .slice(1, -1)
      .map((c) => c.trim());
    const [code = '', http = '', grpcName = '', when = ''] = cells;
    rows.push({ code: code.replace(/`/g, ''), http: Number(http), grpc: grpcName, when });
  }
  return rows;
}

describe('docs/errors.md', () => {
  const rows = parseTable(readFileSync(DOC, 'utf8'));
  const byCode = new Map(rows.map((r) => [r.code, r]));

  it('lists every error code exactly once and nothing else', () => {
    expect(rows.map((r) => r.code).sort()).toEqual(Object.keys(ERROR_CODES).sort());
    expect(byCode.size).toBe(rows.length);
  });

  it.each(Object.keys(ERROR_CODES) as ErrorCode[])(
    'documents the HTTP and gRPC status of %s as the code maps them',
    (code) => {
      const row = byCode.get(code);
      expect(row, `${code} is missing from docs/errors.md`).toBeDefined();
      expect(row?.http).toBe(ERROR_CODES[code].http);
      const named = (grpc.status as unknown as Record<string, number>)[row?.grpc ?? ''];
      expect(named, `unknown gRPC status name "${row?.grpc}"`).toBeDefined();
      expect(named).toBe(ERROR_CODES[code].grpc);
      expect(row?.when.length, `say when ${code} is used`).toBeGreaterThan(20);
    },
  );
});
