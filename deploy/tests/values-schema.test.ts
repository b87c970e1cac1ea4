import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Ajv, type ErrorObject } from 'ajv';
import { describe, expect, it } from 'vitest';
import {
  exampleFiles,
  examplesDir,
  invalidDir,
  invalidFiles,
  mergeValues,
  readYaml,
} from './support/chart.ts';
import { chartDir } from './support/helm.ts';

const schema = JSON.parse(readFileSync(join(chartDir, 'values.schema.json'), 'utf8')) as Record<
  string,
  unknown
>;
const ajv = new Ajv({ allErrors: true, strict: false });
const validate = ajv.compile(schema);

const defaults = readYaml(join(chartDir, 'values.yaml'));

function errorsOf(values: unknown): ErrorObject[] {
  return validate(values) ? [] : [...(validate.errors ?? [])];
}

/** What Helm validates: the user's file coalesced over values.yaml. */
const errorsOfOverride = (file: string): ErrorObject[] => errorsOf(mergeValues(defaults, readYaml(file)));

/** The negative fixtures and the instance path each must be rejected at. */
const EXPECTED_REJECTIONS: Record<string, string> = {
  'unknown-key.yaml': '/gateway',
  'wrong-type.yaml': '/issuer/replicaCount',
  'latest-tag.yaml': '/image/tag',
  'bad-database-url.yaml': '/database/url',
  'bad-kek.yaml': '/kek/value',
  'unknown-plan.yaml': '/plans',
};

describe('values.schema.json', () => {
  it('is a draft-07 schema that rejects unknown top-level keys', () => {
    expect(schema.$schema).toBe('http://json-schema.org/draft-07/schema#');
    expect(schema.additionalProperties).toBe(false);
    expect(errorsOf({ replicaCount: 2 }).map((e) => e.keyword)).toContain('additionalProperties');
  });

  it('accepts the default values.yaml', () => {
    expect(errorsOf(defaults)).toEqual([]);
  });

  it('has at least the minimal and production examples', () => {
    expect(exampleFiles()).toEqual(expect.arrayContaining(['minimal.yaml', 'production.yaml']));
  });

  it.each(exampleFiles())('accepts examples/%s', (file) => {
    expect(errorsOfOverride(join(examplesDir, file))).toEqual([]);
  });

  it('has a negative fixture for every expected rejection and nothing unlisted', () => {
    expect(invalidFiles()).toEqual(Object.keys(EXPECTED_REJECTIONS).sort());
  });

  it.each(invalidFiles())('rejects tests/invalid/%s at the offending value', (file) => {
    const errors = errorsOfOverride(join(invalidDir, file));
    expect(errors.length).toBeGreaterThan(0);
    expect(errors.map((e) => e.instancePath)).toContain(EXPECTED_REJECTIONS[file]);
  });

  it('rejects `latest` but accepts an empty tag (appVersion) and a version tag', () => {
    const withTag = (tag: string) => errorsOf(mergeValues(defaults, { image: { tag } }));
    expect(withTag('latest').map((e) => e.instancePath)).toEqual(['/image/tag']);
    expect(withTag('')).toEqual([]);
    expect(withTag('1.2.3')).toEqual([]);
  });

  it('rejects a container without resource requests', () => {
    const values = mergeValues(defaults, { billing: { resources: null } });
    expect(errorsOf(values).map((e) => e.instancePath)).toContain('/billing');
    const noRequests = mergeValues(defaults, { billing: { resources: { requests: null } } });
    expect(errorsOf(noRequests).map((e) => e.instancePath)).toContain('/billing/resources');
  });
});
