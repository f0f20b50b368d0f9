/**
 * The Chromium the browser tests drive with playwright-core: `launchChromium()` starts it, headless.
 *
 * - Debian's `/usr/bin/chromium` when it is there: the full browser, as users run it, and nothing to
 *   unpack (launch about 0.9 s on 2 cores).
 * - Otherwise the one the npm package `@sparticuz/chromium` ships (a devDependency, so `npm install` is all
 *   it takes; chrome-headless-shell, launch about 0.2 s): its first use unpacks it into the temp dir
 *   (`/tmp/chromium`, `/tmp/fonts`, `/tmp/al2023`; about 2.5 s, later runs reuse them). It runs with the
 *   NSS, NSPR and expat libraries the package bundles (for Amazon Linux 2023) first on LD_LIBRARY_PATH
 *   and with its own fonts, so it needs nothing from the system but glibc and libgcc_s: it runs on a
 *   clean Debian 12, which has no libnss3. If an interrupted first run left a half-written
 *   `/tmp/chromium`, delete it.
 *
 * `TQ_CHROMIUM=npm` forces the npm package's Chromium even where /usr/bin/chromium exists (to test that
 * path); `TQ_CHROMIUM=system` forces Debian's.
 */
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import sparticuz, { inflate } from "@sparticuz/chromium";
import { type Browser, chromium } from "playwright-core";

export const SYSTEM_CHROMIUM = "/usr/bin/chromium";

/** Our flags, for either Chromium: no sandbox (tests run as root), headless, nothing phoning home. */
const FLAGS = [
  "--no-sandbox",
  "--headless",
  "--disable-gpu",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--no-first-run",
];

/**
 * @sparticuz/chromium's flags that the npm Chromium does not get: what is there for AWS Lambda only
 * (`--single-process`, which Lambda's sandbox needs and which elsewhere lets one crash take the whole
 * browser, and `--no-zygote`), the GPU flags (we pass --disable-gpu), and whatever would make the
 * page run with less security or other features than users' browsers give it (web security, site
 * isolation, SharedArrayBuffer without cross-origin isolation). Its other flags (no pings, no
 * domain-reliability reports, no nudges, a small disk cache, ...) are kept; a flag of ours wins over
 * one of its with the same name (`--headless`).
 */
const NOT_FROM_SPARTICUZ = new Set([
  "--single-process",
  "--no-zygote",
  "--ignore-gpu-blocklist",
  "--in-process-gpu",
  "--use-gl",
  "--use-angle",
  "--enable-unsafe-swiftshader",
  "--disable-webgl",
  "--allow-running-insecure-content",
  "--disable-web-security",
  "--disable-site-isolation-trials",
  "--disable-features",
  "--enable-features",
]);

const flagName = (arg: string) => arg.split("=")[0] as string;

/** The npm Chromium's flags: ours, then those of @sparticuz/chromium we keep. */
export function npmChromiumFlags(): string[] {
  const ours = new Set(FLAGS.map(flagName));
  return [...FLAGS, ...sparticuz.args.filter((a) => !ours.has(flagName(a)) && !NOT_FROM_SPARTICUZ.has(flagName(a)))];
}

/** Which Chromium `launchChromium()` starts: `TQ_CHROMIUM` if set, else Debian's if present, else npm's. */
export function chromiumKind(): "system" | "npm" {
  const forced = process.env.TQ_CHROMIUM;
  if (forced === "system" || forced === "npm") return forced;
  if (forced)
    throw new Error(`TQ_CHROMIUM=${forced}: use "system" (${SYSTEM_CHROMIUM}) or "npm" (@sparticuz/chromium)`);
  return existsSync(SYSTEM_CHROMIUM) ? "system" : "npm";
}

/** Launches a headless Chromium (see the top of this file for which one) with playwright-core. */
export async function launchChromium(): Promise<Browser> {
  if (chromiumKind() === "system") {
    if (!existsSync(SYSTEM_CHROMIUM)) throw new Error(`TQ_CHROMIUM=system but ${SYSTEM_CHROMIUM} is missing`);
    return chromium.launch({ executablePath: SYSTEM_CHROMIUM, args: FLAGS });
  }
  const executablePath = await sparticuz.executablePath();
  // The libraries it needs beyond glibc, as the package ships them (it unpacks them itself only on
  // Lambda), and its fonts (executablePath() skips them when it finds the binary already unpacked).
  const bin = join(dirname(createRequire(import.meta.url).resolve("@sparticuz/chromium")), "..", "bin");
  const [libs, fonts] = await Promise.all([inflate(join(bin, "al2023.tar.br")), inflate(join(bin, "fonts.tar.br"))]);
  const env = {
    ...process.env,
    LD_LIBRARY_PATH: [join(libs, "lib"), process.env.LD_LIBRARY_PATH].filter(Boolean).join(":"),
    FONTCONFIG_PATH: fonts,
  };
  try {
    return await chromium.launch({ executablePath, args: npmChromiumFlags(), env });
  } catch (e) {
    throw new Error(
      `@sparticuz/chromium's Chromium (${executablePath}) did not start; if an earlier run was interrupted while unpacking it, delete ${executablePath} and retry: ${(e as Error).message}`,
    );
  }
}
