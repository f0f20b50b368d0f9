/** Calls to the Worker's API from Node, as any client would make them (for the tests that drive a page). */
export type ApiCall = <B>(path: string, method?: string, json?: unknown) => Promise<{ status: number; body: B }>;

export function apiAt(url: () => string, token: string): ApiCall {
  return async <B>(path: string, method = "GET", json?: unknown) => {
    const res = await fetch(`${url()}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${token}`,
        ...(json === undefined ? {} : { "content-type": "application/json" }),
      },
      body: json === undefined ? undefined : JSON.stringify(json),
    });
    const text = await res.text();
    return { status: res.status, body: (text ? JSON.parse(text) : undefined) as B };
  };
}
