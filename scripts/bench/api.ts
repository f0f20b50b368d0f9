/** The API as the delivery benchmarks call it: a POST with the bench token, the answer's status and JSON. */
import { TOKEN } from "./config.js";

export type Api = (path: string, body: unknown, signal?: AbortSignal) => Promise<{ status: number; body: unknown }>;

export function apiOf(url: string): Api {
  return async (path, body, signal) => {
    const res = await fetch(`${url}${path}`, {
      method: "POST",
      headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
      body: JSON.stringify(body),
      signal,
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : undefined };
  };
}
