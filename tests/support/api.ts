/**
 * An HTTP client for end-to-end tests that checks every response it sees against the
 * gateway's own OpenAPI document: the status must be documented for the operation and the
 * body must validate against the documented schema.
 */
import { auditSecretsIn } from '@relayplane/testing/audit';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';

export interface ApiResponse<T = any> {
  status: number;
  headers: Headers;
  body: T;
  text: string;
}

type OpenApiDoc = { paths: Record<string, Record<string, { responses: Record<string, any> }>> };

export class Api {
  readonly baseUrl: string;
  readonly #doc: OpenApiDoc;
  readonly #ajv: Ajv2020;
  readonly #templates: { regex: RegExp; path: string }[];
  /** How many responses were checked against the document. */
  checked = 0;

  private constructor(baseUrl: string, doc: OpenApiDoc) {
    this.baseUrl = baseUrl;
    this.#doc = doc;
    this.#ajv = new Ajv2020({ strict: false, allErrors: true });
    (addFormats as unknown as (ajv: Ajv2020) => void)(this.#ajv);
    this.#ajv.addSchema(doc as object, 'openapi.json');
    this.#templates = Object.keys(doc.paths).map((path) => ({
      path,
      regex: new RegExp(`^${path.replace(/\{[^}]+\}/g, '[^/]+')}$`),
    }));
  }

  static async connect(baseUrl: string): Promise<Api> {
    const res = await fetch(`${baseUrl}/openapi.json`);
    if (res.status !== 200) throw new Error(`GET /openapi.json answered ${res.status}`);
    return new Api(baseUrl, (await res.json()) as OpenApiDoc);
  }

  async request<T = any>(
    method: string,
    path: string,
    options: { body?: unknown; headers?: Record<string, string>; raw?: string } = {},
  ): Promise<ApiResponse<T>> {
    const headers: Record<string, string> = { ...options.headers };
    let body: string | undefined = options.raw;
    if (options.body !== undefined) {
      body = JSON.stringify(options.body);
      headers['content-type'] ??= 'application/json';
    }
    const res = await fetch(this.baseUrl + path, { method, headers, body });
    const text = await res.text();
    const parsed = text && res.headers.get('content-type')?.includes('json') ? JSON.parse(text) : undefined;
    this.#check(method, path, res.status, parsed, text);
    // Passwords sent and codes, tokens and keys answered: the secrets audit looks for them.
    auditSecretsIn(options.body);
    auditSecretsIn(parsed);
    return { status: res.status, headers: res.headers, body: parsed as T, text };
  }

  #check(method: string, url: string, status: number, body: unknown, text: string): void {
    const path = url.split('?')[0] ?? url;
    // A static path wins over a template it also matches (as in Fastify's router):
    // `/admin/v1/auth/sessions/revoke-others` is not `/admin/v1/auth/sessions/{id}`.
    const template =
      this.#templates.find((t) => t.path === path) ?? this.#templates.find((t) => t.regex.test(path));
    if (!template) {
      // Unknown routes answer 404 {error}; nothing is documented for them.
      if (status !== 404 || (body as { error?: unknown })?.error === undefined) {
        throw new Error(`${method} ${path}: undocumented route answered ${status}`);
      }
      this.checked++;
      return;
    }
    const op = this.#doc.paths[template.path]?.[method.toLowerCase()];
    if (!op) throw new Error(`${method} ${template.path} is not documented`);
    const response = op.responses[String(status)];
    if (!response)
      throw new Error(
        `${method} ${template.path} answered ${status}, which is not documented (${text.slice(0, 200)})`,
      );
    const schema = response.content?.['application/json']?.schema;
    if (!schema) {
      if (text !== '') throw new Error(`${method} ${template.path} ${status} should have no body`);
      this.checked++;
      return;
    }
    const pointer = [
      'paths',
      template.path,
      method.toLowerCase(),
      'responses',
      String(status),
      'content',
      'application/json',
      'schema',
    ]
      .map((p) => p.replace(/~/g, '~0').replace(/\//g, '~1'))
      .join('/');
    const validate = this.#ajv.getSchema(`openapi.json#/${pointer}`);
    if (!validate) throw new Error(`no schema at ${pointer}`);
    if (!validate(body)) {
      throw new Error(
        `${method} ${template.path} ${status}: body does not match the documented schema: ${this.#ajv.errorsText(validate.errors)}\n${text.slice(0, 500)}`,
      );
    }
    this.checked++;
  }
}
