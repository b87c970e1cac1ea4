/**
 * Keeps one `process.nextTick` record alive for the life of the process, so that V8's inline
 * caches in Node's `nextTick` stay monomorphic (docs/performance.md, "The nextTick record").
 *
 * Node builds each tick record as an object literal with computed symbol keys
 * (`{ [async_id_symbol]: …, [trigger_async_id_symbol]: …, [async_context_frame]: …, callback,
 * args }`, node:internal/process/task_queues). V8 records, per key of that literal, the one map it
 * saw the object have, and holds those maps weakly. Tick records live for microseconds: a full
 * garbage collection that finds none alive (an idle second is enough) frees the maps after the
 * first key, the next record gets new ones, and V8 marks those keys megamorphic for good: from
 * then on every record is built in the runtime, about 0.3 µs each, ~7 per HTTP request (≈ 2 µs of
 * the ~12 µs a JWKS answer costs). It is a lottery per process: 4 of 5 fresh hello-world servers
 * lost it within 10 s of load. One record held here keeps every map of its chain alive, so the
 * keys stay monomorphic and the records are built inline by the optimized code.
 *
 * What it cannot prevent: the async id in the record outgrowing V8's small integers (2^30 ids,
 * hours to days of full load) changes the record's shape once, and the keys go megamorphic then,
 * as they would without this.
 *
 * No async hook is involved: inside a tick's callback, `executionAsyncResource()` is that tick's
 * record.
 */
import { executionAsyncResource } from 'node:async_hooks';

let retained: object | undefined;

/** Holds the record of one tick, from the next tick on; a call once the record is held does nothing. */
export function retainTickRecordShape(): void {
  if (retained) return;
  process.nextTick(() => {
    retained = executionAsyncResource();
  });
}

/** The record held (tests). */
export function retainedTickRecord(): object | undefined {
  return retained;
}
