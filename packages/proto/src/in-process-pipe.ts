/**
 * A FIFO of messages between the two sides of a stream, ended or failed by the producer and
 * read as an async iterator; `length` is what the reader has not taken yet.
 */
export class Pipe<T> implements AsyncIterable<T> {
  readonly #items: T[] = [];
  #head = 0;
  #done = false;
  #error: unknown;
  #waiting: ((r: IteratorResult<T>) => void) | undefined;
  #failWaiting: ((err: unknown) => void) | undefined;
  #drains: (() => void)[] = [];
  /** Called when the reader stops early (break, return). */
  onReturn: () => void = () => {};

  get length(): number {
    return this.#items.length - this.#head;
  }

  get closed(): boolean {
    return this.#done;
  }

  push(item: T): void {
    if (this.#done) return;
    const waiting = this.#waiting;
    if (waiting) {
      this.#waiting = undefined;
      this.#failWaiting = undefined;
      waiting({ value: item, done: false });
      return;
    }
    this.#items.push(item);
  }

  end(): void {
    if (this.#done) return;
    this.#done = true;
    this.#settleWaiting();
    this.#wakeDrains();
  }

  fail(err: unknown): void {
    if (this.#done) return;
    this.#done = true;
    this.#error = err;
    this.#settleWaiting();
    this.#wakeDrains();
  }

  /** Resolves once the reader has taken enough that fewer than `below` remain (or the pipe is done). */
  drained(below: number): Promise<void> {
    if (this.length < below || this.#done) return Promise.resolve();
    return new Promise((resolve) => {
      const check = () => {
        if (this.length < below || this.#done) resolve();
        else this.#drains.push(check);
      };
      this.#drains.push(check);
    });
  }

  #settleWaiting(): void {
    if (this.length > 0) return;
    const waiting = this.#waiting;
    const failWaiting = this.#failWaiting;
    this.#waiting = undefined;
    this.#failWaiting = undefined;
    if (this.#error !== undefined) failWaiting?.(this.#error);
    else waiting?.({ value: undefined, done: true });
  }

  #wakeDrains(): void {
    if (this.#drains.length === 0) return;
    const drains = this.#drains;
    this.#drains = [];
    for (const check of drains) check();
  }

  #take(): T {
    const item = this.#items[this.#head] as T;
    this.#items[this.#head] = undefined as T;
    this.#head++;
    if (this.#head === this.#items.length) {
      this.#items.length = 0;
      this.#head = 0;
    } else if (this.#head > 1024 && this.#head * 2 > this.#items.length) {
      this.#items.splice(0, this.#head);
      this.#head = 0;
    }
    this.#wakeDrains();
    return item;
  }

  [Symbol.asyncIterator](): AsyncIterator<T> {
    return {
      next: () => {
        if (this.length > 0) return Promise.resolve({ value: this.#take(), done: false });
        if (this.#done) {
          return this.#error !== undefined
            ? Promise.reject(this.#error)
            : Promise.resolve({ value: undefined, done: true });
        }
        return new Promise<IteratorResult<T>>((resolve, reject) => {
          this.#waiting = resolve;
          this.#failWaiting = reject;
        });
      },
      return: () => {
        if (!this.#done) {
          this.#done = true;
          this.#items.length = 0;
          this.#head = 0;
          this.#wakeDrains();
          this.onReturn();
        }
        return Promise.resolve({ value: undefined, done: true });
      },
    };
  }
}
