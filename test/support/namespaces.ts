/**
 * Fresh databases for a test file: namespaces of the shared sqld with namespaces, made on demand,
 * dropped after the file; and what each test opened, closed after it.
 */
import { afterAll, afterEach, inject } from "vitest";
import { sqldNamespaces } from "../../src/core/databases.js";

/** Registers the file's hooks; answers `namespace(tag)` (a new database) and `cleanups` (run after each test, last first). */
export function freshNamespaces(prefix: string) {
  const provider = () => sqldNamespaces({ url: inject("nsSqldUrl"), adminUrl: inject("nsAdminUrl") });
  let serial = 0;
  const made: string[] = [];
  const cleanups: (() => unknown)[] = [];
  afterEach(async () => {
    for (const f of cleanups.splice(0).reverse()) await f();
  });
  afterAll(async () => {
    await Promise.all(
      made.map((ns) =>
        provider()
          .drop(ns)
          .catch(() => false),
      ),
    );
  });
  const namespace = async (tag: string): Promise<string> => {
    const ns = `${prefix}-${tag}-${process.pid}-${serial++}`;
    await provider().create(ns);
    made.push(ns);
    return ns;
  };
  return { namespace, cleanups };
}
