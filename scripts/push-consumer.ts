/**
 * `npm run push-consumer`: a push consumer for the local stack (`npm start`). It listens on
 * 127.0.0.1, subscribes itself (`PUT /v1/subscriptions/<name>`), checks each delivery's signature,
 * prints it and answers 200 (the queue acks it). Ctrl-C unsubscribes and stops.
 *
 * Env: QUEUE_URL (default http://127.0.0.1:8787), QUEUE_TOKEN (default npm start's dev token),
 * PORT (default 8788), NAME (default "local"), FAIL_EVERY=n answers 500 to every n-th delivery
 * (to watch a retry come back with attempts + 1 after its backoff).
 */
import { createServer } from "node:http";
import { createClient, verifySignature } from "../src/client/index.js";
import type { PushDelivery } from "../src/contract/types.js";

const url = process.env.QUEUE_URL ?? "http://127.0.0.1:8787";
const token = process.env.QUEUE_TOKEN ?? "dev-queue-token-change-me";
const port = Number(process.env.PORT ?? 8788);
const name = process.env.NAME ?? "local";
const failEvery = Number(process.env.FAIL_EVERY ?? 0);

const queue = createClient({ url, token });
let secret = "";
let n = 0;

const server = createServer(async (req, res) => {
  let raw = "";
  for await (const chunk of req) raw += chunk;
  if (!(await verifySignature(secret, req.headers["turso-queue-signature"] as string | undefined, raw))) {
    console.log("refused a delivery: bad signature");
    res.writeHead(401).end();
    return;
  }
  const d = JSON.parse(raw) as PushDelivery;
  const fail = failEvery > 0 && ++n % failEvery === 0;
  console.log(`${d.group_id} #${d.seq} attempt ${d.attempts}: ${JSON.stringify(d.event)}${fail ? "  -> 500" : ""}`);
  res.writeHead(fail ? 500 : 200).end();
});
await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve));
const sub = await queue.subscribe(name, { url: `http://127.0.0.1:${port}/` });
secret = sub.signingSecret;
console.log(`subscribed "${name}" at ${url}: deliveries come to http://127.0.0.1:${port}/ (Ctrl-C to stop)`);

const stop = async () => {
  await queue.unsubscribe(name).catch(() => false);
  server.close();
  process.exit(0);
};
process.on("SIGINT", () => void stop());
process.on("SIGTERM", () => void stop());
