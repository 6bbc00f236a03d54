/** What a run may need of this machine beyond Node and the database, and how to get it. */
export const MACHINE_NEEDS = {
  'redis-server': 'install Redis (apt-get install redis-server): the simulation starts its own',
  'PostgreSQL server binaries': 'install PostgreSQL (apt-get install postgresql): the scenario starts servers of its own',
  etcd: 'install etcd (apt-get install etcd-server): the run starts a cluster of its own',
  'mariadb-server': 'install MariaDB (apt-get install mariadb-server): the run starts a server of its own',
  libfaketime: 'install libfaketime (apt-get install faketime): the clock scenarios run replicas under it',
} as const;
export type MachineNeed = keyof typeof MACHINE_NEEDS;
