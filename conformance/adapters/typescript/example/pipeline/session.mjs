// The session log: every event the harness appends, numbered from 1, timed from the start.
import { EventEmitter } from 'node:events';
import { performance } from 'node:perf_hooks';
import { deepFreeze } from './results.mjs';

export class SessionLog extends EventEmitter {
  #events = [];
  #start = performance.now();

  /** Appends an event and tells `append` listeners, synchronously. */
  append(type, data, { surfaceOp, sourceEventSeqs } = {}) {
    const event = { seq: this.#events.length + 1, time: Math.round(performance.now() - this.#start), type, data };
    if (surfaceOp) event.surfaceOp = surfaceOp;
    if (sourceEventSeqs) event.sourceEventSeqs = sourceEventSeqs;
    this.#events.push(deepFreeze(event));
    this.emit('append', event);
    return event;
  }

  get events() {
    return this.#events.slice();
  }
}
