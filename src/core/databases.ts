/**
 * Where a queue's databases come from, behind one small interface: every queue (and every shard of
 * a sharded queue) is a database of its own, with the spec's tables as they are, so that the Python
 * transports keep working on any one of them.
 *
 * - `sqldNamespaces`: one sqld started with `--enable-namespaces` holds them all (its admin API
 *   creates and drops them); what `npm start` and the tests use, with no account.
 * - `tursoDatabases`: the Turso Platform API creates and drops databases in one of your groups; a
 *   group token reaches every database of the group.
 * - `staticDatabases`: a fixed map, for those who manage their databases themselves.
 */
import { invalid, QueueError, toQueueError } from "./errors.js";

/** How to reach one database. */
export interface Database {
  /** `libsql://`, `https://` or `http://` (or a local path, in the library). */
  url: string;
  authToken?: string | undefined;
  /** Its namespace, on an sqld with namespaces. */
  namespace?: string | undefined;
}

export interface DatabaseProvider {
  /** Makes the database `name` (nothing when it exists already) and says how to reach it. */
  create(name: string): Promise<Database>;
  /**
   * How to reach the database `name` under today's configuration, without making it: the catalog
   * keeps no address, so a queue follows its databases when a URL, an organization or a map changes.
   */
  locate(name: string): Promise<Database>;
  /** Drops the database `name` and its data; false when there was none. */
  drop(name: string): Promise<boolean>;
}

type Fetch = (input: string, init?: RequestInit) => Promise<Response>;
const platformFetch: Fetch = (input, init) => fetch(input, init);

/** One sqld with `--enable-namespaces`: a database is a namespace, reached at `url` with its name in a header. */
export function sqldNamespaces(o: {
  url: string;
  adminUrl: string;
  authToken?: string | undefined;
  fetch?: Fetch;
}): DatabaseProvider {
  const f = o.fetch ?? platformFetch;
  const admin = o.adminUrl.replace(/\/+$/, "");
  const at = (name: string): Database => ({ url: o.url, authToken: o.authToken, namespace: name });
  return {
    locate: async (name) => at(name),
    async create(name) {
      const res = await call(f, `${admin}/v1/namespaces/${encodeURIComponent(name)}/create`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: "{}",
      });
      const text = await res.text();
      if (!res.ok && !/already exists/i.test(text)) throw failure(`creating namespace ${name}`, res.status, text);
      return at(name);
    },
    async drop(name) {
      const res = await call(f, `${admin}/v1/namespaces/${encodeURIComponent(name)}`, { method: "DELETE" });
      const text = await res.text();
      if (res.status === 404 || /doesn't exist|does not exist/i.test(text)) return false;
      if (!res.ok) throw failure(`dropping namespace ${name}`, res.status, text);
      return true;
    },
  };
}

/**
 * Databases in a Turso group, made and dropped through the Platform API
 * (`POST /v1/organizations/{org}/databases`, `DELETE .../databases/{name}`), reached with
 * `databaseToken` (a group token: `turso group tokens create <group>`).
 */
export function tursoDatabases(o: {
  organization: string;
  group: string;
  /** A Platform API token (`turso auth api-tokens mint`). */
  apiToken: string;
  databaseToken: string;
  /** Default `https://api.turso.tech`. */
  apiUrl?: string;
  fetch?: Fetch;
}): DatabaseProvider {
  const f = o.fetch ?? platformFetch;
  const base = `${(o.apiUrl ?? "https://api.turso.tech").replace(/\/+$/, "")}/v1/organizations/${encodeURIComponent(o.organization)}/databases`;
  const headers = { authorization: `Bearer ${o.apiToken}`, "content-type": "application/json" };
  const reach = (hostname: string): Database => ({ url: `libsql://${hostname}`, authToken: o.databaseToken });
  // A database's hostname, as the Platform API answers it today (asked once per provider: a
  // renamed organization is followed by the next isolate).
  const hosts = new Map<string, Promise<string>>();
  const hostOf = (name: string): Promise<string> => {
    let h = hosts.get(name);
    if (h === undefined) {
      h = (async () => {
        const got = await call(f, `${base}/${encodeURIComponent(name)}`, { headers });
        const body = await got.text();
        if (got.status === 404) {
          throw new QueueError(
            "UNAVAILABLE",
            `the Turso database ${name} does not exist in organization ${o.organization}`,
          );
        }
        if (!got.ok) throw failure(`reading Turso database ${name}`, got.status, body);
        return hostnameOf(body, name);
      })();
      hosts.set(name, h);
      h.catch(() => hosts.delete(name));
    }
    return h;
  };
  return {
    locate: async (name) => reach(await hostOf(name)),
    async create(name) {
      const res = await call(f, base, { method: "POST", headers, body: JSON.stringify({ name, group: o.group }) });
      const text = await res.text();
      if (res.ok) {
        const host = hostnameOf(text, name);
        hosts.set(name, Promise.resolve(host));
        return reach(host);
      }
      if (res.status !== 409) throw failure(`creating Turso database ${name}`, res.status, text);
      // It exists: where is it?
      return reach(await hostOf(name));
    },
    async drop(name) {
      const res = await call(f, `${base}/${encodeURIComponent(name)}`, { method: "DELETE", headers });
      const text = await res.text();
      hosts.delete(name);
      if (res.status === 404) return false;
      if (!res.ok) throw failure(`dropping Turso database ${name}`, res.status, text);
      return true;
    },
  };
}

/** A fixed map of databases: nothing is made or dropped (a queue's data stays where you put it). */
export function staticDatabases(map: Record<string, Database | string>): DatabaseProvider {
  const known = new Map(Object.entries(map).map(([k, d]) => [k, typeof d === "string" ? { url: d } : d]));
  const listed = () => [...known.keys()].join(", ") || "none";
  return {
    async create(name) {
      const d = known.get(name);
      if (d === undefined)
        throw invalid("queue", `has no database in the static map (add "${name}" to it; it lists ${listed()})`);
      return d;
    },
    async locate(name) {
      const d = known.get(name);
      if (d === undefined) {
        throw new QueueError("UNAVAILABLE", `the static map has no database ${name} any more (it lists ${listed()})`);
      }
      return d;
    },
    async drop(name) {
      return known.has(name);
    },
  };
}

async function call(f: Fetch, url: string, init: RequestInit): Promise<Response> {
  try {
    return await f(url, { ...init, signal: AbortSignal.timeout(30_000) });
  } catch (e) {
    throw toQueueError(e);
  }
}

function hostnameOf(text: string, name: string): string {
  try {
    const body = JSON.parse(text) as { database?: { Hostname?: unknown; hostname?: unknown } };
    const host = body.database?.Hostname ?? body.database?.hostname;
    if (typeof host === "string" && host !== "") return host;
  } catch {
    // not JSON: said below
  }
  throw new QueueError("DATABASE", `the Turso Platform API answered no hostname for database ${name}`);
}

function failure(what: string, status: number, text: string): QueueError {
  const code = status === 401 || status === 403 ? "UNAUTHORIZED" : status >= 500 ? "UNAVAILABLE" : "DATABASE";
  return new QueueError(code, `${what}: HTTP ${status} ${text.slice(0, 300)}`);
}
