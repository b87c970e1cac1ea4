import { afterEach, describe, expect, it } from 'vitest';
import { type Harness, refusal, startHarness } from './support/harness.ts';
import { credentialClaims, mint } from './support/tokens.ts';

let h: Harness | undefined;
afterEach(async () => {
  await h?.dispose();
  h = undefined;
});

const iso = (ms: number) => new Date(ms).toISOString();

/** Project watermarks from the feed (docs/credentials.md, "Containment"; verification rule 7). */
describe('project watermarks from the revocation feed', () => {
  it("refuses a project's credentials issued before its watermark, listed or not, and only that project's", async () => {
    const watermark = Math.floor(Date.now() / 1000) * 1000 - 60_000;
    h = await startHarness({}, (plane) => {
      plane.watermarks = [{ project_id: 'prj_7hQ2', issued_before: iso(watermark) }];
    });
    await h.verifier.ready;
    const beforeClaims = credentialClaims(watermark - 1_000);
    const before = await mint(h.key, beforeClaims);
    const atIt = await mint(h.key, credentialClaims(watermark));
    const after = await mint(h.key, credentialClaims(h.clock.now));
    const otherProject = await mint(
      h.key,
      credentialClaims(watermark - 1_000, { sub: 'prj_other', pid: 'prj_other' }),
    );

    expect(await refusal(h.verifier.verify(before))).toBe('revoked');
    // Refused by the watermark alone: the feed never listed its jti.
    expect(h.verifier.isRevoked(String(beforeClaims.jti))).toBe(false);
    // iat in seconds: a credential issued at the watermark's instant is not before it.
    expect((await h.verifier.verify(atIt)).pid).toBe('prj_7hQ2');
    expect((await h.verifier.verify(after)).pid).toBe('prj_7hQ2');
    expect((await h.verifier.verify(otherProject)).pid).toBe('prj_other');
  });

  it('learns a raised watermark from the next answer, never lowers it, and keeps it when an answer omits it', async () => {
    h = await startHarness({ revocationWaitSeconds: 1 }, (plane) => {
      plane.watermarks = [];
    });
    await h.verifier.ready;
    const now = h.clock.now;
    const old = await mint(h.key, credentialClaims(now - 30_000));
    expect((await h.verifier.verify(old)).pid).toBe('prj_7hQ2');

    h.plane.watermarks = [{ project_id: 'prj_7hQ2', issued_before: iso(now - 10_000) }];
    const seen = h.plane.feedRequests.length;
    await h.plane.waitForRequest(
      (r) => r.path.endsWith('/revocations') && h !== undefined && h.plane.feedRequests.indexOf(r) > seen,
    );
    expect(await refusal(h.verifier.verify(old))).toBe('revoked');

    // Lower, then gone: the verifier keeps the highest it saw.
    h.plane.watermarks = [{ project_id: 'prj_7hQ2', issued_before: iso(now - 60_000) }];
    const again = h.plane.feedRequests.length;
    await h.plane.waitForRequest(
      (r) => r.path.endsWith('/revocations') && h !== undefined && h.plane.feedRequests.indexOf(r) > again,
    );
    h.plane.watermarks = undefined;
    const third = h.plane.feedRequests.length;
    await h.plane.waitForRequest(
      (r) => r.path.endsWith('/revocations') && h !== undefined && h.plane.feedRequests.indexOf(r) > third,
    );
    expect(await refusal(h.verifier.verify(old))).toBe('revoked');
  });

  it('fails closed on an unreadable issued_before, and ignores entries without a project', async () => {
    h = await startHarness({}, (plane) => {
      plane.watermarks = [
        { project_id: 'prj_7hQ2', issued_before: 'not a time' },
        { project_id: '', issued_before: iso(Date.now()) },
        { project_id: 42, issued_before: iso(Date.now()) },
      ];
    });
    await h.verifier.ready;
    const fresh = await mint(h.key, credentialClaims(h.clock.now));
    expect(await refusal(h.verifier.verify(fresh))).toBe('revoked');
    const other = await mint(h.key, credentialClaims(h.clock.now, { sub: 'prj_other', pid: 'prj_other' }));
    expect((await h.verifier.verify(other)).pid).toBe('prj_other');
    expect(h.errors).toEqual([]);
  });
});
