export { startRedisServer, freePort, waitForPort, type RedisServerProcess, type RedisServerOptions } from './redis/redis-server.js';
