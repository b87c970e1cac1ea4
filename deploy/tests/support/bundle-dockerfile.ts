/**
 * Reads what a Dockerfile target's image would run: its environment, working directory,
 * user, ENTRYPOINT and CMD, following `FROM <stage>` inheritance inside the file. Only the
 * instructions the bundle tests need; exec-form (JSON) CMD/ENTRYPOINT only.
 */
import { readFileSync } from 'node:fs';

export interface ImageSpec {
  target: string;
  /** The stage chain, the first one built on an external image. */
  stages: string[];
  /** The external base image of the chain (after ARG substitution). */
  base: string;
  env: Record<string, string>;
  workdir: string | undefined;
  user: string | undefined;
  /** Undefined: the Dockerfile never sets it (the base image's applies); [] clears it. */
  entrypoint: string[] | undefined;
  cmd: string[] | undefined;
  /** COPY instructions' arguments of the chain, in order. */
  copies: string[];
}

interface Stage {
  name: string | undefined;
  from: string;
  instructions: { keyword: string; args: string }[];
}

/** Joins continuation lines and drops comments and blank lines. */
function logicalLines(text: string): string[] {
  const lines: string[] = [];
  let current = '';
  for (const raw of text.split('\n')) {
    const trimmed = raw.trim();
    if (trimmed.startsWith('#') || (trimmed === '' && current === '')) continue;
    if (trimmed.endsWith('\\')) {
      current += `${trimmed.slice(0, -1).trim()} `;
      continue;
    }
    current += trimmed;
    if (current.trim()) lines.push(current.trim());
    current = '';
  }
  if (current.trim()) lines.push(current.trim());
  return lines;
}

function parseStages(text: string): { stages: Stage[]; args: Record<string, string> } {
  const args: Record<string, string> = {};
  const stages: Stage[] = [];
  for (const line of logicalLines(text)) {
    const match = /^(\w+)\s*(.*)$/s.exec(line);
    if (!match) continue;
    const keyword = (match[1] ?? '').toUpperCase();
    const rest = match[2] ?? '';
    if (keyword === 'FROM') {
      const from = /^(?:--\S+\s+)*(\S+)(?:\s+AS\s+(\S+))?$/i.exec(rest);
      if (!from) throw new Error(`cannot parse FROM ${rest}`);
      stages.push({ from: from[1] ?? '', name: from[2]?.toLowerCase(), instructions: [] });
    } else if (stages.length === 0) {
      if (keyword === 'ARG') {
        const [name, value] = rest.split('=', 2);
        if (name && value !== undefined) args[name.trim()] = value.trim();
      }
    } else {
      stages.at(-1)?.instructions.push({ keyword, args: rest });
    }
  }
  return { stages, args };
}

/** `K=V K2="v w"` (or the legacy `K V`). */
function parseEnv(args: string): Record<string, string> {
  const env: Record<string, string> = {};
  if (!/^[^\s=]+=/.test(args)) {
    const [name, ...value] = args.split(/\s+/);
    if (name) env[name] = value.join(' ');
    return env;
  }
  const pattern = /([^\s=]+)=("(?:[^"\\]|\\.)*"|'[^']*'|\S*)/g;
  for (const m of args.matchAll(pattern)) {
    const name = m[1] ?? '';
    let value = m[2] ?? '';
    if (value.startsWith('"')) value = value.slice(1, -1).replace(/\\(.)/g, '$1');
    else if (value.startsWith("'")) value = value.slice(1, -1);
    env[name] = value;
  }
  return env;
}

function parseExecForm(keyword: string, args: string): string[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(args);
  } catch {
    throw new Error(`${keyword} must be in exec (JSON) form, got: ${args}`);
  }
  if (!Array.isArray(parsed) || !parsed.every((a) => typeof a === 'string')) {
    throw new Error(`${keyword} must be a JSON array of strings, got: ${args}`);
  }
  return parsed;
}

export function readImageSpec(dockerfilePath: string, target: string): ImageSpec {
  const { stages, args } = parseStages(readFileSync(dockerfilePath, 'utf8'));
  const chain: Stage[] = [];
  let name: string | undefined = target.toLowerCase();
  for (;;) {
    const stage = stages.find((s) => s.name === name);
    if (!stage || chain.includes(stage)) throw new Error(`no stage named ${name} in ${dockerfilePath}`);
    chain.unshift(stage);
    const parent = stage.from.toLowerCase();
    if (!stages.some((s) => s.name === parent)) break;
    name = parent;
  }
  const spec: ImageSpec = {
    target,
    stages: chain.map((s) => s.name ?? ''),
    base: (chain[0]?.from ?? '').replace(/\$\{(\w+)\}|\$(\w+)/g, (_, a, b) => args[a ?? b] ?? ''),
    env: {},
    workdir: undefined,
    user: undefined,
    entrypoint: undefined,
    cmd: undefined,
    copies: [],
  };
  for (const stage of chain) {
    for (const { keyword, args: rest } of stage.instructions) {
      if (keyword === 'ENV') Object.assign(spec.env, parseEnv(rest));
      else if (keyword === 'WORKDIR')
        spec.workdir = rest.startsWith('/') ? rest : `${spec.workdir ?? ''}/${rest}`;
      else if (keyword === 'USER') spec.user = rest;
      else if (keyword === 'COPY') spec.copies.push(rest);
      else if (keyword === 'ENTRYPOINT') {
        spec.entrypoint = parseExecForm(keyword, rest);
        // Setting ENTRYPOINT resets an inherited CMD.
        spec.cmd = undefined;
      } else if (keyword === 'CMD') spec.cmd = parseExecForm(keyword, rest);
    }
  }
  return spec;
}
