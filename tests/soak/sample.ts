/** What one soak sample holds (every 30 s), as written to tests/soak/results/latest.json. */

export interface ProcessSample {
  /** `gateway-0`, `issuer-1`, `admin`, `billing`. */
  name: string;
  /** VmRSS from /proc/<pid>/status. */
  rssBytes: number;
  /** The app's own `nodejs_heap_size_used_bytes`. */
  heapUsedBytes: number;
  /**
   * `nodejs_heap_size_total_bytes`: what V8 has reserved for its heap, live objects and garbage
   * not yet collected alike. Its new space alone may grow to 128 MiB under Node 24's defaults
   * (two 64 MiB semi-spaces) and shrink back, which RSS follows and heap used hides.
   */
  heapTotalBytes: number;
  /** `nodejs_external_memory_bytes`: memory of Buffers and other C++ objects tied to JS objects. */
  externalBytes: number;
  /** `nodejs_eventloop_lag_p99_seconds`: prom-client resets it at each scrape, so it covers the last interval. */
  loopDelayP99Seconds: number;
  /** `nodejs_active_handles_total`: sockets, servers, child pipes (not timers). */
  activeHandles: number;
  /** CPU time over the interval per second of it (1 = one core busy); none for the first sample. */
  cpuCores?: number;
}

/** A paced (open-loop) stream over the interval, both gateways together. */
export interface StreamWindow {
  rps: number;
  /** The worse of the two gateways' p99 (ms), counted from when each request fell due. */
  p99: number;
  non2xx: number;
  errors: number;
}

export interface Sample {
  at: string;
  /** Seconds since the mixed load started. */
  elapsedSeconds: number;
  processes: ProcessSample[];
  postgres: {
    /** Backends connected to the soak's database. */
    connections: number;
    /** The same by `application_name` (`relayplane-<schema>`). */
    byApplication: Record<string, number>;
  };
  redis: {
    /** `INFO memory` used_memory of the whole server (shared with whatever else uses it). */
    usedMemoryBytes: number;
    /** Keys under the soak's prefix. */
    keys: number;
  };
  /** The interval's CPU, from /proc: none for the first sample, which ends no interval. */
  cpu?: {
    /** Share of the machine's CPU time (every core) spent busy, whoever spent it. */
    machineBusy: number;
    /** CPU time of the soak's own process (the load generator) per second (1 = one core). */
    loadGeneratorCores: number;
    /**
     * CPU time of the PostgreSQL backends serving the soak's database and of the Redis server
     * (all of it) per second (calibrate.ts).
     */
    dependencyCores?: number;
  };
  /** Answers the gateways counted since they started (`relayplane_http_requests_total`), by status. */
  answersByStatus: Record<string, number>;
  /** The paced streams over the interval that ended with this sample (none for the first). */
  streams?: Record<string, StreamWindow>;
}
