// What the documents' TypeScript blocks take as given: the objects of the reader's own app (its
// clients, pools, guard, logger, a token in hand), declared once here with the types the app would
// have. Everything a block takes from a library it imports itself, as a reader copying it must. The
// install test writes each block beside this file and type-checks them all, strict, with
// exactOptionalPropertyTypes and every declaration file checked.
import type { Redis } from 'ioredis';
import type pg from 'pg';
import type { Generated, Insertable, Kysely } from 'kysely';
import type { Envelope, Token } from '@fenced/shared';
import type { Coordinator, JobDefinition } from '@fenced/coordinator';
import type { Guard } from '@fenced/consumer-guard';
import type { Queue } from 'bullmq';
import type { WorkerUtils } from 'graphile-worker';
import type { Express } from 'express';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';

/** The reader's database, as Kysely sees it. */
export interface Database {
  invoices: { id: Generated<number>; fire_id: string; customer: string; total: number };
  accounts: { id: number; cents: number };
}

type Invoice = Insertable<Database['invoices']>;

declare global {
  /** The app's ioredis client (a single server; Sentinel and Cluster clients are built in the blocks). */
  const redis: Redis;
  /** BullMQ's connection. */
  const connection: Redis;
  /** The app's pg pool. */
  const pool: pg.Pool;
  /** Kysely over that pool. */
  const db: Kysely<Database>;
  const connectionString: string;
  /** The app's guard (createGuard over its pool). */
  const guard: Guard<pg.PoolClient>;
  /** The app's wrapped handler (guard.wrapHandler). */
  const handle: ReturnType<Guard<pg.PoolClient>['wrapHandler']>;
  const coordinator: Coordinator;
  const jobs: Record<string, JobDefinition>;
  /** A token in hand: the current term's, or one a task carried. */
  const token: Token;
  const currentLeaderToken: Token;
  const envelope: Envelope;
  const keys: Record<string, string>;
  const secret: string;
  const oldSecret: string;
  const row: Invoice;
  const amount: number;
  const id: number;
  const total: number;
  const url: string;
  const body: string;
  const bullmqQueue: Queue;
  const workerUtils: WorkerUtils;
  const app: Express;
  const fastify: FastifyInstance;
  const log: Logger;
  /** A write, for the blocks that show only how a guarded write is called. */
  function fn(client: pg.PoolClient): Promise<unknown>;
  function sendInvoiceEmail(payload: unknown, options: { idempotencyKey: string }): Promise<void>;
  function toRow(payload: unknown): Omit<Invoice, 'fire_id'>;
  function handleInvoices(envelope: Envelope): Promise<void>;
  function findCustomer(envelope: Envelope, options: { signal: AbortSignal }): Promise<{ id: string } | null>;
}
