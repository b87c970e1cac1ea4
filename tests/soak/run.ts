/**
 * `pnpm soak` (SOAK_MINUTES, default 10): the distributed mode (2 gateways, 2 issuers, admin,
 * billing as processes) on a fresh database of TEST_DATABASE_URL's server and a fresh prefix
 * of TEST_REDIS_URL, under a mixed load at about half the machine's capacity (mix.ts) for
 * SOAK_MINUTES, sampled every 30 s: each process's RSS, heap, event-loop delay p99 and open
 * handles, PostgreSQL connections and Redis memory. It fails (exit code 1, saying why) on any
 * 5xx but 503, on RSS growth over 10 % after the first two minutes, or on a steady rise of
 * anything it samples (verdict.ts, trend.ts). Samples go to tests/soak/results/latest.json.
 *
 * Both gateways reach both issuers (startDistributed lists every replica, as the chart's
 * headless Services do). Every process it starts is
 * stopped by PID at the end, and the database and the prefix's keys are removed, also after a
 * failure or Ctrl-C (which ends the run after the current 30 s window).
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import pg from 'pg';
import { Api } from '../support/api.ts';
import { type Distributed, startDistributed } from '../support/distributed.ts';
import { waitFor } from '../support/ports.ts';
import { ROOT } from '../support/processes.ts';
import {
  CALIBRATION_SCALES,
  CALIBRATION_SECONDS,
  CALIBRATION_UNMEASURED_SECONDS,
  type CalibrationPoint,
  cpuBetween,
  fitScale,
  machineCores,
  readCpu,
  scaleRates,
  TARGET_SHARE,
} from './calibrate.ts';
import {
  type Fixtures,
  measureCapacity,
  mixRates,
  pacedWindow,
  type Rates,
  STREAM_SHARES,
  setUpFixtures,
  startFlows,
} from './mix.ts';
import { deleteKeys, findMetricsUrl } from './probes.ts';
import { clock, memoryTable, sampleBlock, samplesTable, seriesTable } from './report.ts';
import type { Sample, StreamWindow } from './sample.ts';
import { createSampler, gatewayAnswers, type Target } from './sampler.ts';
import { judgeAnswers, judgeSamples, SAMPLE_SECONDS } from './verdict.ts';

const MINUTES = Number(process.env.SOAK_MINUTES ?? 10);
if (!Number.isFinite(MINUTES) || MINUTES <= 0) {
  console.error(`SOAK_MINUTES must be a positive number of minutes (got "${process.env.SOAK_MINUTES}")`);
  process.exit(78);
}
const DATABASE_URL = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const RESULTS = join(ROOT, 'tests', 'soak', 'results', 'latest.json');

/**
 * The V8 heap sizes every app runs with in production (the chart's NODE_OPTIONS; see
 * docs/performance.md, "Soak"): without them V8 sizes its heap from the machine's memory — on
 * a 24 GiB machine a 4 GiB limit, 64 MiB semi-spaces and an old generation let grow to about
 * four times its live objects before a full collection — and an app's RSS swung by 100–200
 * MiB with no leak (admin: heap total 60 ↔ 260 MiB while 35–45 MiB were live). With them its
 * heap stays within about 40–60 MiB, and a container's memory limit no longer decides it.
 */
export const PRODUCTION_NODE_OPTIONS = '--max-old-space-size=256 --max-semi-space-size=8';

/**
 * Admin's malloc setting in production (the chart's admin env; docs/performance.md, "Soak"):
 * a fixed mmap threshold, so that each login's 19 MiB argon2id block is mmap'd and unmapped
 * when the hash ends. With glibc's default, the first such free raises the threshold above
 * 19 MiB and later blocks stay in malloc's arenas: admin kept ~85 MiB more and grew in steps.
 */
export const ADMIN_MALLOC_ENV = { MALLOC_MMAP_THRESHOLD_: '131072' };

const shortName = (procName: string) => procName.replace(/^soak-/, '');
/** A machine busier than this during the calibration is saturated: the fit means little. */
const SATURATED = 0.95;
const describeRates = (r: Rates) =>
  `issuance ${r.issuance}/s, assignment ${r.assignment}/s, JWKS ${r.jwks}/s`;

async function main(): Promise<number> {
  const dbName = `rp_soak_${randomBytes(4).toString('hex')}`;
  const prefix = `soak:${dbName}:`;
  const dbUrl = new URL(DATABASE_URL);
  dbUrl.pathname = `/${dbName}`;
  // Connected to the server's base database, so that it is not one of the soak database's backends.
  const postgres = new pg.Client({ connectionString: DATABASE_URL });
  await postgres.connect();
  await postgres.query(`create database "${dbName}"`);
  const redis = new Redis(REDIS_URL, { maxRetriesPerRequest: 3 });
  const tmp = mkdtempSync(join(tmpdir(), 'rp-soak-'));
  const stop = new AbortController();
  const onSignal = () => {
    console.log('\nstopping after the current window…');
    stop.abort();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  let system: Distributed | undefined;
  /** Set once the soak stops the apps: their exits are no longer failures. */
  let stopping = false;
  let stopped = false;
  try {
    // The bootstrap tenant's plan with a cap and a per-key issuance rate the load never reaches
    // (the closed-loop capacity measurement issues thousands a second over one API key).
    const plans = join(tmp, 'plans.yaml');
    writeFileSync(
      plans,
      'plans:\n  enterprise:\n    limits: { max_concurrent_connections: 10000000, max_issuance_per_second_per_key: 1000000 }\n',
    );
    const owner = { email: 'soak@example.test', password: randomBytes(18).toString('base64url') };
    system = await startDistributed({
      label: 'soak',
      databaseUrl: dbUrl.toString(),
      redisUrl: REDIS_URL,
      redisPrefix: prefix,
      kek: randomBytes(32).toString('base64'),
      bootstrap: owner,
      logLevel: 'warn',
      replicas: { issuer: 2, gateway: 2 },
      appEnv: { admin: ADMIN_MALLOC_ENV },
      extraEnv: {
        NODE_OPTIONS: PRODUCTION_NODE_OPTIONS,
        RELAYPLANE_PLANS_FILE: plans,
        // Port 0: every replica gets the same variables; probes.ts finds each one's port.
        GATEWAY_METRICS_ADDRESS: '127.0.0.1:0',
        ISSUER_METRICS_ADDRESS: '127.0.0.1:0',
        ADMIN_METRICS_ADDRESS: '127.0.0.1:0',
        BILLING_METRICS_ADDRESS: '127.0.0.1:0',
        // Every login of the mix is the owner's, from 127.0.0.1, once a second: the per-IP
        // throttle (50 per 15 min) and the per-account one (100, successes count) would answer
        // 429 within two minutes. The per-account-and-IP one stays (a success clears it).
        ADMIN_LOGIN_MAX_PER_IP: '1000000',
        ADMIN_LOGIN_MAX_PER_ACCOUNT: '100000',
      },
    });
    const failures: string[] = [];
    for (const p of system.procs) {
      void p.exited.then((code) => {
        if (stopping) return;
        failures.push(
          `${shortName(p.name)} exited with code ${code} during the soak (tests/.logs/${p.name}.log)`,
        );
        stop.abort();
      });
    }
    const targets: Target[] = [];
    const apiPorts = new Set(system.baseUrls.map((url) => Number(new URL(url).port)));
    for (const p of system.procs) {
      const pid = p.child.pid;
      if (pid === undefined) throw new Error(`${p.name} has no PID`);
      let metricsUrl: string | undefined;
      await waitFor(
        async () => {
          metricsUrl = await findMetricsUrl(pid, apiPorts);
          return metricsUrl !== undefined;
        },
        30_000,
        `${p.name}'s metrics listener`,
      );
      targets.push({ name: shortName(p.name), pid, metricsUrl: metricsUrl as string });
    }
    const apis = await Promise.all(system.baseUrls.map((url) => Api.connect(url)));
    const fx: Fixtures = await setUpFixtures(apis, owner);

    console.log(
      'measuring capacity: each stream alone, closed loop (issuance 10 s, assignment and JWKS 5 s)…',
    );
    const capacity = await measureCapacity(system.baseUrls, fx);
    const shareRates = mixRates(capacity.rates);
    const busy = (name: keyof Rates) => `machine ${Math.round(capacity.machineBusy[name] * 100)} % busy`;
    console.log(
      `capacity: issuance ${capacity.rates.issuance}/s (${busy('issuance')}), assignment ${capacity.rates.assignment}/s ` +
        `(${busy('assignment')}), JWKS ${capacity.rates.jwks}/s (${busy('jwks')}); the shares ` +
        `(${STREAM_SHARES}) give ${describeRates(shareRates)}`,
    );

    const flows = startFlows(apis, fx, stop.signal);
    const cores = machineCores();
    console.log(
      `\ncalibrating with the scripted flows running: the streams ${CALIBRATION_SECONDS} s at each of ` +
        `${CALIBRATION_SCALES.map((x) => `${x * 100} %`).join(', ')} of those rates (the last ` +
        `${CALIBRATION_SECONDS - CALIBRATION_UNMEASURED_SECONDS} s of each measured), aiming at ` +
        `${Math.round(TARGET_SHARE * 100)} % of ${cores} cores…`,
    );
    const cpuOptions = { pids: targets.map((t) => t.pid), postgres, database: dbName, redis };
    const points: CalibrationPoint[] = [];
    let calibrationErrors = 0;
    for (const scale of CALIBRATION_SCALES) {
      // The flows alone (scale 0), or with the streams: measured after the window's first seconds.
      const window =
        scale > 0
          ? pacedWindow(system.baseUrls, fx, scaleRates(shareRates, scale), CALIBRATION_SECONDS)
          : sleep(CALIBRATION_SECONDS * 1000).then((): Record<string, StreamWindow> => ({}));
      // Awaited below; a failure meanwhile must not count as unhandled.
      window.catch(() => {});
      await sleep(CALIBRATION_UNMEASURED_SECONDS * 1000);
      const before = await readCpu(cpuOptions);
      const w = await window;
      const used = cpuBetween(before, await readCpu(cpuOptions));
      calibrationErrors += Object.values(w).reduce((n, x) => n + x.errors, 0);
      points.push({ scale, soakCores: used.soakCores, machineBusy: used.machineBusy });
      console.log(
        `  at ${scale * 100} % (${scale > 0 ? describeRates(scaleRates(shareRates, scale)) : 'the flows alone'}): the soak used ${used.soakCores} cores ` +
          `(apps and load generator ${used.appsAndLoadCores}, PostgreSQL and Redis ${used.dependencyCores}); ` +
          `machine ${Math.round(used.machineBusy * 100)} % busy`,
      );
    }
    const calibration = fitScale(points, cores);
    const busiest = Math.max(...points.map((p) => p.machineBusy));
    if (busiest >= SATURATED) {
      console.log(
        `  the machine was ${Math.round(busiest * 100)} % busy during the calibration: other work takes CPU ` +
          'the soak would use, so its share of the machine cannot be measured and answers may come late',
      );
    }
    const rates = scaleRates(shareRates, calibration.scale);
    console.log(
      `  fitted: ${calibration.fixedCores} cores + ${calibration.coresPerScale} × the fraction; ` +
        `${calibration.targetCores} cores at ${Math.round(calibration.scale * 1000) / 10} %` +
        `${calibration.note ? ` (${calibration.note})` : ''}: paced at ${describeRates(rates)} for the whole run`,
    );

    const samples: Sample[] = [];
    const takeSample = createSampler({ targets, postgres, database: dbName, redis, prefix });
    const sample = async (streams?: Record<string, StreamWindow>): Promise<void> => {
      const s = await takeSample(streams);
      console.log(sampleBlock(s, samples.at(-1)));
      samples.push(s);
    };

    console.log(`\nmixed load for ${MINUTES} minute(s), a sample every ${SAMPLE_SECONDS} s:`);
    const windows = Math.max(1, Math.round((MINUTES * 60) / SAMPLE_SECONDS));
    try {
      await sample();
      for (let w = 0; w < windows && !stop.signal.aborted; w++) {
        await sample(await pacedWindow(system.baseUrls, fx, rates, SAMPLE_SECONDS));
      }
    } catch (err) {
      // A process gone (its exit is a failure of its own) or a probe broken: judge what was sampled.
      failures.push(`the soak stopped early: ${(err as Error).message}`);
    }
    stop.abort();
    await flows.done;
    const answers = await gatewayAnswers(targets).catch((err: Error) => {
      failures.push(`the gateways' answer counts could not be read: ${err.message}`);
      return [];
    });

    // Stopped before judging, so that an unclean exit is judged too.
    stopping = true;
    const codes = await system.stop();
    stopped = true;
    system.procs.forEach((p, i) => {
      if (codes[i] !== 0) failures.push(`${shortName(p.name)} exited with code ${codes[i]} on SIGTERM`);
    });
    const verdict = judgeSamples(samples);
    const streamErrors = samples.reduce(
      (sum, s) => sum + Object.values(s.streams ?? {}).reduce((n, w) => n + w.errors, 0),
      0,
    );
    if (streamErrors + calibrationErrors)
      failures.push(
        `${streamErrors + calibrationErrors} paced request(s) got no answer (connection lost or 10 s late)`,
      );
    failures.push(...judgeAnswers(answers));
    if (flows.tally.failureCount) {
      failures.push(
        `${flows.tally.failureCount} unexpected answer(s) in the scripted flows, first ones:\n    ${flows.tally.failures.join('\n    ')}`,
      );
    }
    failures.push(...verdict.failures);

    console.log(
      `\n## Samples\n\n${samplesTable(samples)}\n\n## Heap and the rest\n\n${memoryTable(samples)}\n\n## Series\n\n${seriesTable(verdict.series)}\n`,
    );
    console.log(
      `scripted flows: ${Object.entries(flows.tally.answers)
        .map(
          ([op, byStatus]) =>
            `${op} ${Object.entries(byStatus)
              .map(([s, n]) => `${n}×${s}`)
              .join(' ')}`,
        )
        .join(', ')}`,
    );
    for (const line of verdict.notJudged) console.log(`not judged: ${line}`);
    mkdirSync(join(ROOT, 'tests', 'soak', 'results'), { recursive: true });
    writeFileSync(
      RESULTS,
      `${JSON.stringify(
        {
          date: new Date().toISOString(),
          commit: execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT }).toString().trim(),
          node: process.version,
          nodeOptions: PRODUCTION_NODE_OPTIONS,
          adminEnv: ADMIN_MALLOC_ENV,
          minutes: MINUTES,
          capacity,
          shareRates,
          calibration,
          rates,
          samples,
          answers,
          flows: flows.tally,
          verdict: {
            failures,
            notJudged: verdict.notJudged,
            // Raw units, as sampled: bytes, seconds, counts.
            series: verdict.series.map(({ name, atWarmup, trend }) => ({ name, atWarmup, trend })),
          },
        },
        null,
        2,
      )}\n`,
    );
    console.log(`samples written to ${RESULTS}`);
    if (failures.length) {
      console.error(
        `\nsoak FAILED after ${clock(samples.at(-1)?.elapsedSeconds ?? 0)}:\n- ${failures.join('\n- ')}`,
      );
      return 1;
    }
    console.log(
      `\nsoak passed: ${clock(samples.at(-1)?.elapsedSeconds ?? 0)} of mixed load, ${samples.length} samples`,
    );
    return 0;
  } finally {
    stopping = true;
    if (!stopped) await system?.stop();
    await deleteKeys(redis, prefix);
    redis.disconnect();
    await postgres.query(`drop database if exists "${dbName}" with (force)`);
    await postgres.end();
    rmSync(tmp, { recursive: true, force: true });
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}

process.exitCode = await main();
