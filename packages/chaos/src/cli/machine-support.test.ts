import { describe, expect, it } from 'vitest';
import type { SimApp } from '../sim/sim-app.js';
import { needsOf, runnableHere, type MachineNeed } from './machine-support.js';

const app = (usesRedis?: SimApp['usesRedis']) => ({ name: 'app', ...(usesRedis === undefined ? {} : { usesRedis }) }) as SimApp;

describe('what a machine can run', () => {
  it('names what each run needs: Redis unless the app uses none on its lease store, servers of its own, the lease store’s (etcd, MariaDB), libfaketime', () => {
    expect(needsOf(app(), { scenario: 'pause', leaseStore: 'postgres' })).toEqual(['redis-server']);
    expect(needsOf(app((store) => store === 'redis'), { scenario: 'pause', leaseStore: 'postgres' })).toEqual([]);
    expect(needsOf(app((store) => store === 'redis'), { scenario: 'postgres-restart', leaseStore: 'postgres' })).toEqual(['PostgreSQL server binaries']);
    expect(needsOf(app((store) => store === 'redis'), { scenario: 'pause', leaseStore: 'etcd' })).toEqual(['etcd']);
    expect(needsOf(app((store) => store === 'redis'), { scenario: 'pause', leaseStore: 'mysql' })).toEqual(['mariadb-server']);
    expect(needsOf(app(), { scenario: 'clock-skew', leaseStore: 'redis' })).toEqual(['redis-server', 'libfaketime']);
  });

  it('keeps what the machine can run and says, in one line, what it left out and what to install', () => {
    const has = (need: MachineNeed) => need !== 'redis-server';
    const { runnable, leftOut } = runnableHere(
      app((store) => store === 'redis'),
      [
        { scenario: 'pause', leaseStore: 'redis' },
        { scenario: 'pause', leaseStore: 'postgres' },
        { scenario: 'crash', leaseStore: 'redis' },
      ],
      has,
    );
    expect(runnable).toEqual([{ scenario: 'pause', leaseStore: 'postgres' }]);
    expect(leftOut).toBe('left out 2 of 3 (pause, crash), which this machine cannot run (no redis-server: install Redis (apt-get install redis-server): the simulation starts its own)');
    expect(runnableHere(app(), [{ scenario: 'pause', leaseStore: 'redis' }], () => true)).toEqual({ runnable: [{ scenario: 'pause', leaseStore: 'redis' }], leftOut: undefined });
  });
});
