// The deterministic simulation's whole-process pause (process-pauses.ts), against its own promise: a
// paused node's timers, the notices and grants sent to it are held, everything else runs on, and on
// resume what was held runs in the order it fell due.
import FakeTimers, { type Clock } from '@sinonjs/fake-timers';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ProcessPauses } from './process-pauses.js';

let clock: Clock;
let pauses: ProcessPauses;
/** What ran, each with the virtual time it ran at. */
let ran: string[];
const note = (what: string) => () => void ran.push(`${what}@${Date.now()}`);

beforeEach(() => {
  clock = FakeTimers.withGlobal(globalThis).install({ now: 0, toFake: ['setTimeout', 'clearTimeout', 'setImmediate', 'clearImmediate', 'Date'] });
  pauses = new ProcessPauses();
  pauses.install();
  ran = [];
});

afterEach(() => {
  pauses.uninstall();
  clock.uninstall();
});

describe('a whole-process pause in the deterministic simulation', () => {
  it("holds the paused node's timers while the others run, then runs them on resume, in the order they fell due", async () => {
    pauses.runAs(0, () => {
      setTimeout(note('a0'), 150);
      setTimeout((what: string) => note(what)(), 100, 'b0');
      setImmediate((what: string) => note(what)(), 'c0');
    });
    pauses.runAs(1, () => setTimeout(note('a1'), 100));
    setTimeout(note('harness'), 120);
    await clock.tickAsync(0);
    expect(ran).toEqual(['c0@0']);
    pauses.pause(0);
    await clock.tickAsync(300);
    expect(ran).toEqual(['c0@0', 'a1@100', 'harness@120']);
    pauses.resume(0);
    await clock.tickAsync(0);
    expect(ran).toEqual(['c0@0', 'a1@100', 'harness@120', 'b0@300', 'a0@300']);
  });

  it('follows a node through its promises and its own timers: what they set is the same node\'s', async () => {
    pauses.runAs(0, async () => {
      await Promise.resolve();
      setTimeout(() => {
        note('first')();
        setTimeout(note('second'), 100);
      }, 100);
    });
    await clock.tickAsync(150);
    pauses.pause(0);
    await clock.tickAsync(200);
    expect(ran).toEqual(['first@100']);
    pauses.resume(0);
    await clock.tickAsync(0);
    expect(ran).toEqual(['first@100', 'second@350']);
  });

  it('cancels a held timer, and one set again on resume that has not run yet', async () => {
    const timers = pauses.runAs(0, () => [setTimeout(note('held'), 50), setTimeout(note('reset'), 60), setTimeout(note('kept'), 70)]);
    pauses.pause(0);
    await clock.tickAsync(100);
    clearTimeout(timers[0]);
    pauses.resume(0);
    clearTimeout(timers[1]);
    await clock.tickAsync(0);
    expect(ran).toEqual(['kept@100']);
  });

  it('holds what is sent to a paused node (a notice, a lock granted) until it runs again', async () => {
    pauses.pause(2);
    pauses.deliver(2, note('notice'));
    void pauses.gate(2).then(note('granted'));
    void pauses.gate(1).then(note('other'));
    await clock.tickAsync(500);
    expect(ran).toEqual(['other@0']);
    pauses.resume(2);
    await clock.tickAsync(0);
    expect(ran).toEqual(['other@0', 'granted@500', 'notice@500']);
  });

  it('drops what a node held when it crashes while paused: its next incarnation runs', async () => {
    pauses.runAs(0, () => setTimeout(note('old'), 50));
    pauses.pause(0);
    await clock.tickAsync(100);
    pauses.forget(0);
    expect(pauses.isPaused(0)).toBe(false);
    pauses.runAs(0, () => setTimeout(note('new'), 50));
    await clock.tickAsync(100);
    expect(ran).toEqual(['new@150']);
  });

  it('puts the timer functions back when uninstalled', () => {
    pauses.uninstall();
    const fake = { setTimeout: globalThis.setTimeout, clearTimeout: globalThis.clearTimeout, setImmediate: globalThis.setImmediate, clearImmediate: globalThis.clearImmediate };
    pauses = new ProcessPauses();
    pauses.install();
    expect(globalThis.setTimeout).not.toBe(fake.setTimeout);
    pauses.uninstall();
    expect({ setTimeout: globalThis.setTimeout, clearTimeout: globalThis.clearTimeout, setImmediate: globalThis.setImmediate, clearImmediate: globalThis.clearImmediate }).toEqual(fake);
    pauses = new ProcessPauses();
    pauses.install();
  });
});
