import { AppError, errorSummary, toAppError } from '@relayplane/contract/errors';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';

interface ValidationIssue {
  instancePath: string;
  keyword: string;
  params: Record<string, unknown>;
  message?: string;
}

const CONTEXT_NAMES: Record<string, string> = {
  body: 'request body',
  querystring: 'query string',
  params: 'path',
  headers: 'headers',
};

function fieldName(instancePath: string, extra?: unknown): string {
  const parts = instancePath.split('/').filter(Boolean);
  if (extra !== undefined) parts.push(String(extra));
  return parts.join('.');
}

/** One clear sentence for a schema failure: unknown fields first, then missing ones, then the rest. */
function describeValidation(issues: readonly ValidationIssue[], context: string | undefined): string {
  const where = CONTEXT_NAMES[context ?? 'body'] ?? 'request';
  const unknown = issues.filter((i) => i.keyword === 'additionalProperties');
  if (unknown.length) {
    const names = unknown.map((i) => `"${fieldName(i.instancePath, i.params.additionalProperty)}"`);
    return `unknown field${names.length > 1 ? 's' : ''} ${[...new Set(names)].join(', ')} in ${where}`;
  }
  const missing = issues.filter((i) => i.keyword === 'required');
  if (missing.length) {
    const names = missing.map((i) => `"${fieldName(i.instancePath, i.params.missingProperty)}"`);
    return `missing required field${names.length > 1 ? 's' : ''} ${names.join(', ')} in ${where}`;
  }
  const first = issues[0];
  if (!first) return `invalid ${where}`;
  const field = fieldName(first.instancePath);
  if (first.keyword === 'type') {
    return field === ''
      ? `${where} must be a JSON ${first.params.type}`
      : `field "${field}" must be ${first.params.type}`;
  }
  return field === ''
    ? `${where} ${first.message ?? 'is invalid'}`
    : `field "${field}" ${first.message ?? 'is invalid'}`;
}

function send(reply: FastifyReply, status: number, message: string, retryAfter?: number): void {
  if (retryAfter !== undefined) reply.header('retry-after', String(retryAfter));
  reply
    .code(status)
    .type('application/json; charset=utf-8')
    .send(JSON.stringify({ error: message }));
}

/**
 * A C0 control character (U+0000–U+001F) or DEL, percent-encoded or literal, in the URL's path or
 * query string. No identifier, filter, cursor, time or code this API takes contains one, and
 * PostgreSQL cannot store NUL (a filter holding one would fail as a 500), so they are refused
 * as bad input for every route, before routing's result or any guard runs.
 */
// biome-ignore lint/suspicious/noControlCharactersInRegex: they are what it looks for (literal ones too: inject() skips Node's HTTP parser)
const URL_CONTROL_CHARACTER = /%(?:[01][0-9a-f]|7f)|[\u0000-\u001f\u007f]/i;
export const URL_CONTROL_CHARACTER_MESSAGE =
  'the URL must not contain NUL or other control characters (U+0000–U+001F, U+007F) in its path or query string';

/** Answers 400 `{"error"}` for a NUL or another control character in any path parameter or query value. */
export function refuseControlCharactersInUrl(app: FastifyInstance): void {
  app.addHook('onRequest', (request, reply, done) => {
    if (URL_CONTROL_CHARACTER.test(request.url)) {
      send(reply, 400, URL_CONTROL_CHARACTER_MESSAGE);
      return;
    }
    done();
  });
}

/** Every error becomes `{"error": "..."}` with the status of the one table in @relayplane/contract/errors. */
export function registerErrorHandling(app: FastifyInstance, bodyLimitBytes: number): void {
  app.setErrorHandler((err: FastifyError | AppError, request: FastifyRequest, reply: FastifyReply) => {
    if (err instanceof AppError) {
      // A bug is an error; a dependency that is away (503) is an outage, logged once per request.
      if (err.code === 'internal') request.log.error({ err: err.cause ?? err, code: err.code }, err.message);
      else if (err.code === 'unavailable')
        request.log.warn({ err: errorSummary(err.cause), code: err.code }, err.message);
      send(reply, err.httpStatus, err.message, err.retryAfterSeconds);
      return;
    }
    if (err.validation) {
      send(reply, 400, describeValidation(err.validation as ValidationIssue[], err.validationContext));
      return;
    }
    switch (err.code) {
      case 'FST_ERR_CTP_BODY_TOO_LARGE':
        send(reply, 413, `request body is larger than ${bodyLimitBytes} bytes`);
        return;
      case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
        send(reply, 415, 'content-type must be application/json');
        return;
      case 'FST_ERR_CTP_EMPTY_JSON_BODY':
        send(reply, 400, 'request body is empty');
        return;
      case 'FST_ERR_CTP_INVALID_JSON_BODY':
        send(reply, 400, 'request body is not valid JSON');
        return;
    }
    const status = err.statusCode ?? 500;
    if (status >= 400 && status < 500) {
      // Fastify's own 4xx (malformed JSON, bad content length, ...): the message is about the request.
      send(reply, status, err instanceof SyntaxError ? 'request body is not valid JSON' : err.message);
      return;
    }
    const failure = toAppError(err);
    if (failure.code === 'unavailable')
      request.log.warn({ err: errorSummary(err) }, 'dependency unavailable');
    else request.log.error({ err }, 'unhandled error');
    send(reply, failure.httpStatus, failure.message, failure.retryAfterSeconds);
  });

  app.setNotFoundHandler((request, reply) => {
    send(reply, 404, `no route for ${request.method} ${request.url.split('?')[0]}`);
  });
}
