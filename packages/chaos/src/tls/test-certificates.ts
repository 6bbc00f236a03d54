import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** A key pair and its certificate, as PEM file paths. */
export interface CertificateFiles {
  readonly cert: string;
  readonly key: string;
}

/**
 * Certificates for a TLS test on loopback, made by the system's `openssl` (a real CA, nothing
 * mocked): a CA, a server certificate it signed for 127.0.0.1 and localhost, a client certificate it
 * signed (its common name is `clientName`, which etcd takes for the user when it checks client
 * certificates), and a second CA that signed nothing the server knows: what a misconfigured client
 * trusts. Valid for two days; `remove()` deletes them.
 */
export interface TestCertificates {
  readonly dir: string;
  readonly ca: string;
  readonly server: CertificateFiles;
  readonly client: CertificateFiles;
  readonly otherCa: string;
  remove(): void;
}

export async function createTestCertificates(options: { readonly clientName?: string } = {}): Promise<TestCertificates> {
  const dir = mkdtempSync(join(tmpdir(), 'fenced-tls-'));
  const at = (name: string) => join(dir, name);
  const openssl = (...args: string[]) => run('openssl', args, { cwd: dir }).catch((err: Error) => {
    throw new Error(`openssl ${args[0]} failed (is openssl installed?): ${err.message}`, { cause: err });
  });
  // P-256 keys: fast to make, and what both OpenSSL and Go's TLS (etcd) accept everywhere.
  const key = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  const selfSigned = (name: string, subject: string) => openssl('req', '-x509', ...key, '-keyout', at(`${name}.key`), '-out', at(`${name}.crt`), '-days', '2', '-subj', subject);
  const signed = async (name: string, subject: string, extensions: string) => {
    writeFileSync(at(`${name}.ext`), extensions);
    await openssl('req', ...key, '-keyout', at(`${name}.key`), '-out', at(`${name}.csr`), '-subj', subject);
    await openssl('x509', '-req', '-in', at(`${name}.csr`), '-CA', at('ca.crt'), '-CAkey', at('ca.key'), '-CAcreateserial', '-out', at(`${name}.crt`), '-days', '2', '-extfile', at(`${name}.ext`));
  };
  try {
    await selfSigned('ca', '/CN=fenced test CA');
    await selfSigned('other-ca', '/CN=fenced unrelated CA');
    await signed('server', '/CN=fenced test server', 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n');
    await signed('client', `/CN=${options.clientName ?? 'fenced-client'}`, 'extendedKeyUsage=clientAuth\n');
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  return {
    dir,
    ca: at('ca.crt'),
    server: { cert: at('server.crt'), key: at('server.key') },
    client: { cert: at('client.crt'), key: at('client.key') },
    otherCa: at('other-ca.crt'),
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}
