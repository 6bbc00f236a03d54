export { createRedisGuard, type RedisGuard, type RedisMutation } from './redis-guard.js';
