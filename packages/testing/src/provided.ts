/** What the globalSetup hands to test workers through vitest's provide/inject. */
declare module 'vitest' {
  export interface ProvidedContext {
    databaseUrl: string;
    redisUrl: string;
  }
}

export {};
